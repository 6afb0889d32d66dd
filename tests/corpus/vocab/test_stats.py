"""Held-out statistics on a vocabulary small enough to count by hand."""

import pytest
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from clozeworks.corpus.vocab.stats import heldout_stats


def tiny() -> Tokenizer:
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "##s", "."]
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.add_special_tokens(vocab[:5])
    return tok


def test_counts_rates_and_vocabulary_use() -> None:
    # "the cats sat." -> the cat ##s sat .   (3 words, 5 tokens, 13 chars)
    # "a dog"         -> [UNK] [UNK]          (2 words, 2 tokens, 5 chars)
    held = heldout_stats(tiny(), [["the cats sat."], ["a dog"]], unk_id=1, special_ids=range(5))
    stats = held.summary()
    assert stats["documents"] == 2 and stats["words"] == 5 and stats["chars"] == 18
    assert stats["tokens"] == 7 and stats["unk_tokens"] == 2
    assert stats["unk_rate"] == pytest.approx(2 / 7, abs=1e-6)
    assert stats["tokens_per_word"] == pytest.approx(7 / 5)
    assert stats["chars_per_token"] == pytest.approx(18 / 7, abs=1e-6)
    # the, cat, ##s, sat, "." of the 5 regular entries; [UNK] does not count as use.
    assert stats["vocab_used"] == 5 and stats["vocab_used_share"] == 1.0
    # Per-id counts for replacements by frequency: [UNK] x2, the, cat, sat, ##s, "." once.
    assert held.token_counts()["counts"] == [0, 2, 0, 0, 0, 1, 1, 1, 1, 1]


def test_nothing_held_out_gives_no_rates() -> None:
    stats = heldout_stats(tiny(), [], unk_id=1, special_ids=range(5)).summary()
    assert stats["tokens"] == 0 and stats["unk_rate"] is None
    assert stats["tokens_per_word"] is None and stats["vocab_used_share"] == 0.0


def test_heldout_warnings_name_the_readme_thresholds() -> None:
    from clozeworks.corpus.vocab.stats import heldout_warnings

    assert heldout_warnings({"unk_rate": 0.0005, "tokens_per_word": 1.3}) == []
    unk, cut = heldout_warnings({"unk_rate": 0.004, "tokens_per_word": 1.99})
    assert unk.startswith("UNK rate 0.400% is above 0.1%") and "--kind bpe" in unk
    assert cut.startswith("1.99 tokens per word is above 1.5") and "--vocab-size" in cut
    assert heldout_warnings({"unk_rate": None, "tokens_per_word": None}) == []
