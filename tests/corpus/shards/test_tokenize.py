"""Documents -> sentence ids: whatever path the encoder takes, the ids are those of encoding
each sentence alone (the spec), empty sentences dropped."""

from itertools import islice

import numpy as np
import pytest
from tokenizers import Tokenizer, pre_tokenizers

from clozeworks.corpus.shards.tokenize import SENTENCE_MARK, DocumentEncoder, TokenizedBatch
from clozeworks.corpus.text.demo import iter_docstrings
from clozeworks.corpus.text.sentences import split_sentences
from clozeworks.corpus.vocab import fast
from clozeworks.corpus.vocab.train import VocabConfig, train_tokenizer

TEXTS = [d["text"] for d in islice(iter_docstrings(), 600)] + [
    "",
    "   ",
    "\x00\x01",
    "One. Two! Three?",
    "Ünïcödé «quotes». 日本語の文です。次の文です。",
]


def _each_sentence_alone(tok, texts):
    docs = []
    for text in texts:
        ids = [tok.encode(s, add_special_tokens=False).ids for s in split_sentences(text)]
        docs.append([s for s in ids if s])
    return docs


def _as_lists(batch: TokenizedBatch):
    return [[s.tolist() for s in batch.document(d).sentences()] for d in range(len(batch))]


@pytest.fixture(scope="module", params=["wordpiece", "bpe", "unigram"])
def tokenizer(request):
    return train_tokenizer(TEXTS[:400], VocabConfig(kind=request.param, vocab_size=2000))


def test_marked_documents_give_each_sentences_own_ids(tokenizer, monkeypatch) -> None:
    # With `tokenizers` encoding (no faster exact encoder, fast.py), documents are marked.
    monkeypatch.setenv(fast.ENCODER_VARIABLE, "tokenizers")
    encoder = DocumentEncoder(tokenizer)
    assert encoder.marked is not None  # our three kinds take the marked path
    batch = encoder.encode(TEXTS)
    assert _as_lists(batch) == _each_sentence_alone(tokenizer, TEXTS)
    assert batch.ids.dtype == np.int32 and len(batch) == len(TEXTS)
    assert (np.diff(batch.sentences) > 0).all()  # no empty sentence


def test_a_text_holding_the_mark_is_encoded_sentence_by_sentence(tokenizer) -> None:
    texts = [*TEXTS[:20], f"Before the mark. {SENTENCE_MARK} After it."]
    batch = DocumentEncoder(tokenizer).encode(texts)
    assert _as_lists(batch) == _each_sentence_alone(tokenizer, texts)


def test_a_tokenizer_the_mark_would_change_is_not_marked() -> None:
    """A Metaspace that prepends to the first section only would lose the word start of
    every sentence but the first."""
    tok = train_tokenizer(TEXTS[:400], VocabConfig(kind="unigram", vocab_size=2000))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    encoder = DocumentEncoder(tok)
    assert encoder.marked is None
    assert _as_lists(encoder.encode(TEXTS[:50])) == _each_sentence_alone(tok, TEXTS[:50])


def test_truncation_and_padding_in_the_tokenizer_are_ignored(tokenizer) -> None:
    tok = Tokenizer.from_str(tokenizer.to_str())
    tok.enable_truncation(4)
    tok.enable_padding(length=64)
    batch = DocumentEncoder(tok).encode(TEXTS[:50])
    assert _as_lists(batch) == _each_sentence_alone(tokenizer, TEXTS[:50])


def test_unsplit_documents_are_one_sentence(tokenizer) -> None:
    batch = DocumentEncoder(tokenizer).encode([*TEXTS[:30], "  "], split=False)
    whole = [tokenizer.encode(t, add_special_tokens=False).ids for t in TEXTS[:30]]
    assert _as_lists(batch) == [[w] for w in whole] + [[]]


def test_select_and_concat_keep_documents_whole(tokenizer) -> None:
    batch = DocumentEncoder(tokenizer).encode(TEXTS[:40])
    docs = _as_lists(batch)
    order = np.array([7, 3, 39, 0, 3], dtype=np.int64)
    assert _as_lists(batch.select(order)) == [docs[i] for i in order]
    halves = TokenizedBatch.concat([batch.select(np.arange(15)), batch.select(np.arange(15, 40))])
    assert _as_lists(halves) == docs
