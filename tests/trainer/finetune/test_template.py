"""Fine-tuning inputs from the fastest exact encoder (issue 39, item 1): for every
vocabulary kind, sentence, pair and token-task inputs built from its pieces and the
template read off the post-processor are `Tokenizer.encode_batch`'s, id for id, with the
same token types, word ids and cut counts, on real documents in nine scripts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors

from clozeworks.corpus.vocab.train import VocabConfig, train_tokenizer
from clozeworks.trainer.finetune import encoded, tokens
from clozeworks.trainer.finetune import template as template_module
from clozeworks.trainer.finetune.readers import Example
from clozeworks.trainer.finetune.template import (
    TEXT_A,
    TEXT_B,
    Template,
    cut_pair,
    cuts_as_tokenizers,
    read_template,
)
from tests.corpus.text import real_documents
from tests.corpus.vocab.test_fast import KINDS  # every kind, T5's sentinels among them

ROOT = Path(__file__).resolve().parents[3]
DOCUMENTS = [text for _, _, text in real_documents.files()]
EDGES = [
    "Deploy 🚀 done ✅ 👩‍💻 🇰🇷🇯🇵 👍🏽",
    "tab\there\x00nul\x07bell\x1b[31mred\r\nCRLF\x0bVT\u200bZWSP\ufeffBOM",
    "",
    " ",
    "The [CLS] token and [SEP], <s> and </s> and <mask> written as text.",
    "DEL\x7fin a word, ÉCOLE [MASK] été, Ｆｕｌｌ ｗｉｄｔｈ",
]
LENGTHS = (8, 13, 64, 512)


@pytest.fixture(scope="module", params=list(KINDS))
def tokenizer(request) -> Tokenizer:
    return train_tokenizer(DOCUMENTS, VocabConfig(vocab_size=2000, **KINDS[request.param]))


def _lines() -> list[str]:
    lines = [line for text in DOCUMENTS for line in text.splitlines() if line.strip()]
    return lines + EDGES + ["x" * 3000, " ".join(lines[:40])]


def test_templates_are_read_off_the_post_processor(tokenizer) -> None:
    single, pair = read_template(tokenizer, False), read_template(tokenizer, True)
    assert single is not None and pair is not None
    assert TEXT_A in single.parts and TEXT_B not in single.parts
    assert pair.parts.index(TEXT_A) < pair.parts.index(TEXT_B)
    assert single.added == tokenizer.num_special_tokens_to_add(False)
    assert pair.added == tokenizer.num_special_tokens_to_add(True)


def test_sentence_and_pair_inputs_are_encode_batchs(tokenizer) -> None:
    lines = _lines()
    examples = [
        Example(a, None if i % 3 == 0 else lines[(i * 7 + 1) % len(lines)], float(i % 2), i)
        for i, a in enumerate(lines)
    ]
    for max_len in LENGTHS:
        got = encoded.encode(tokenizer, examples, max_len)
        tok = encoded.plain_copy(tokenizer)
        want = encoded._encode_with_tokenizers(tok, examples, max_len, got.labels)
        assert got.ids == want.ids, max_len
        assert got.types == want.types, max_len
        assert got.truncated == want.truncated > 0, max_len
    assert tokenizer.truncation is None  # the caller's tokenizer is left as it was


def test_token_task_inputs_are_encode_batchs(tokenizer) -> None:
    words = [w for line in _lines() for w in line.split()] + ["\x7f", "\u200b", "é"]
    sentences = [
        tokens.Sentence(words[i : i + n], [j % 5 for j in range(n)], i)
        for i, n in zip(range(0, len(words), 37), [1, 5, 30, 80, 200] * 1000, strict=False)
    ]
    sentences = [s for s in sentences if s.words]
    for max_len in LENGTHS:
        got = tokens.encode_sentences(tokenizer, sentences, max_len)
        want = tokens._encode_with_tokenizers(encoded.plain_copy(tokenizer), sentences, max_len)
        for field in ("ids", "types", "piece_labels", "first_pieces", "truncated"):
            assert getattr(got, field) == getattr(want, field), (field, max_len)


def test_longest_first_cuts_the_longer_text_then_both_halves() -> None:
    assert cut_pair(3, 4, 10) == (3, 4)
    assert cut_pair(3, 20, 10) == (3, 7)
    assert cut_pair(20, 3, 10) == (7, 3)
    assert cut_pair(20, 30, 11) == (5, 6)
    assert cut_pair(30, 20, 11) == (6, 5)
    assert cut_pair(20, 20, 11) == (5, 6)


def test_what_no_template_shows_is_left_to_tokenizers() -> None:
    """Without a pair template `tokenizers` puts the texts side by side, which is a
    template too; a normalizer that empties every text shows none, and `tokenizers`
    encodes."""
    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "a": 3, "b": 4}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
    )
    assert read_template(tok, True) == Template((TEXT_A, TEXT_B), (0, 1))
    examples = [Example("a b", "b a c", 0.0, 1), Example("b", None, 1.0, 2)]
    for normalizer in (None, normalizers.Replace(Regex("."), "")):
        tok.normalizer = normalizer
        got = encoded.encode(tok, examples, 8)
        want = encoded._encode_with_tokenizers(encoded.plain_copy(tok), examples, 8, got.labels)
        assert got.ids == want.ids and got.types == want.types
    assert read_template(tok, False) is None
    assert got.ids == [[], [1, 2]]


def test_pairs_go_to_tokenizers_where_it_cuts_otherwise(monkeypatch) -> None:
    """A release whose `longest_first` gives an odd room's extra piece elsewhere (as
    0.23.2 does) is found out, and its pairs are encoded by `tokenizers` itself."""
    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, **{c: i + 3 for i, c in enumerate("abcdefgh")}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 1), ("[SEP]", 2)],
    )
    examples = [Example("a b c d e f g", "h g f e d", 0.0, 1)]  # room 5 of 8: 3 + 2 kept

    def second_gets_the_extra(n_a: int, n_b: int, room: int) -> tuple[int, int]:
        keep_a, keep_b = cut_pair(n_a, n_b, room)
        return (keep_b, keep_a) if keep_a == keep_b + 1 and n_a + n_b > room else (keep_a, keep_b)

    cuts_as_tokenizers.cache_clear()
    monkeypatch.setattr(template_module, "cut_pair", second_gets_the_extra)
    monkeypatch.setattr(encoded, "cut_pair", second_gets_the_extra)
    try:
        assert not cuts_as_tokenizers()
        got = encoded.encode(tok, examples, 8)
    finally:
        cuts_as_tokenizers.cache_clear()
    want = encoded._encode_with_tokenizers(encoded.plain_copy(tok), examples, 8, got.labels)
    assert got.ids == want.ids == [[1, 3, 4, 5, 2, 10, 9, 2]]


def test_the_pinned_tokenizers_cuts_pairs_as_cut_pair() -> None:
    """Under the release CI pins, pairs take the fast path, so the comparisons above test
    it (elsewhere they may compare `tokenizers` with itself, which is still right)."""
    import tokenizers

    pinned = re.search(r"^tokenizers==(\S+)$", ROOT.joinpath("constraints.txt").read_text(), re.M)
    assert pinned is not None
    if tokenizers.__version__ != pinned.group(1):
        pytest.skip(f"tokenizers {tokenizers.__version__}, not the pinned {pinned.group(1)}")
    assert cuts_as_tokenizers()
