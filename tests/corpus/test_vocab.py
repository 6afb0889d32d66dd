"""Tokenizer training and the Hugging Face directory format, with real `tokenizers` and
`transformers` (no downloads)."""

import pytest

from corpus.demo_corpus import iter_docstrings
from corpus.vocab import VocabConfig, load_tokenizer, save_tokenizer, train_tokenizer
from schemas.errors import BadInputError

SENTENCES = [
    "Return the lowest index in the string where substring sub is found.",
    "Unbelievably, the tokenizer handles hyphenated-words and CamelCase identifiers.",
]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return [d["text"] for _, d in zip(range(1500), iter_docstrings(), strict=False)]


@pytest.mark.parametrize("kind", ["wordpiece", "bpe", "unigram"])
def test_trained_tokenizer_loads_in_transformers_with_the_same_ids(tmp_path, texts, kind) -> None:
    from transformers import AutoTokenizer

    config = VocabConfig(kind=kind, vocab_size=1500)
    tok = train_tokenizer(texts, config)
    out = save_tokenizer(tok, config, tmp_path / "tok")
    info = load_tokenizer(out)
    assert info.kind == kind
    hf = AutoTokenizer.from_pretrained(str(out))
    for s in SENTENCES:
        assert hf(s)["input_ids"] == info.tokenizer.encode(s).ids
    assert hf.mask_token_id == info.special_ids["mask"]
    if kind == "wordpiece":
        assert list(info.special_ids.values()) == [0, 1, 2, 3, 4]
        pair = hf("first part", "second part")
        assert pair["input_ids"][0] == 2 and pair["input_ids"].count(3) == 2
        assert set(pair["token_type_ids"]) == {0, 1}


@pytest.mark.parametrize("kind", ["wordpiece", "bpe", "unigram"])
def test_word_start_table_marks_first_pieces(texts, kind) -> None:
    tok = train_tokenizer(texts, VocabConfig(kind=kind, vocab_size=600))
    info_table = __import__("corpus.vocab", fromlist=["word_start_table"]).word_start_table
    from schemas.special_tokens import special_tokens_for

    table = info_table(tok, special_tokens_for(kind))
    enc = tok.encode("unbelievably hyphenated", add_special_tokens=False)
    words = enc.word_ids
    starts = [table[i] for i in enc.ids]
    # a piece starts a word exactly when its word id differs from the previous piece's
    expected = [i == 0 or words[i] != words[i - 1] for i in range(len(words))]
    assert len(enc.ids) > 2, "the test words should split into several pieces"
    # The first piece of a sequence starts a word whatever its spelling (BPE's first word has
    # no "Ġ", as in RoBERTa); masking treats the piece after [CLS] as a start.
    assert starts[1:] == expected[1:]


def test_empty_input_is_a_clear_error() -> None:
    with pytest.raises(BadInputError, match="no text to train a vocabulary"):
        train_tokenizer(["", "   "], VocabConfig(kind="wordpiece", vocab_size=100))


def test_plain_bert_vocab_txt_is_accepted(tmp_path) -> None:
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "##s", "."]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    info = load_tokenizer(tmp_path / "vocab.txt")
    assert info.kind == "wordpiece"
    assert info.tokenizer.encode("The cats sat.").ids == [2, 5, 6, 8, 7, 9, 3]
    (tmp_path / "bad.txt").write_text("just\nwords\n")
    with pytest.raises(BadInputError, match="lacks"):
        load_tokenizer(tmp_path / "bad.txt")
