"""Turning documents into token-id sentences with the `tokenizers` fast path.

A batch of documents is split into sentences and encoded with one `encode_batch_fast` call
(Rust, all cores, no offsets); the ids come back as one flat array with sentence and
document boundaries beside it (`TokenizedBatch`), which is what the instance builders read
and what travels cheaply between Beam stages.

Each document goes to the tokenizer as one string, its sentences joined by a marker that
the encoding tokenizer knows as a special token: the marker's ids give the sentence
boundaries back, and the Rust side handles a few long strings instead of many short ones
(a fifth less tokenizer time on short documents, and a third fewer Python objects). The
sections between added tokens are normalized and pre-tokenized one by one, so this gives
exactly the ids of encoding each sentence alone; `DocumentEncoder` checks that on probe
texts when it is built and encodes sentence by sentence for a tokenizer where it does not
hold (a Metaspace that prepends only to the first section), or for a batch whose text
contains the marker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import chain

import numpy as np
from tokenizers import Tokenizer

from clozeworks.corpus.shards.ranges import gather, offsets, range_positions
from clozeworks.corpus.text.sentences import DEFAULT_LANGUAGE, split_sentences
from clozeworks.corpus.vocab.fast import ID_DTYPE, fast_encoder, tokenizers_encoder

# Joins a document's sentences; private-use characters, so no real text is mistaken for it.
SENTENCE_MARK = "\ue000clozeworks:sentence\ue001"
# Texts whose sentence-by-sentence ids the marked encoding must reproduce.
_PROBES = (
    "Hello world. This is a test!  Another one? Yes.",
    "Mr. Smith paid $3.50 for 2.5 kg, i.e. a lot.\nThen he left... Did he?",
    "«Bonjour», dit-il. Ça va ? Très bien ! Ἀρχή. Ünïcödé ÀÉÎ.",
    "日本語の文です。次の文です。 한국어 문장. Русский текст. עברית.",
    "  leading space. Tabs\tand\nnew lines.  Trailing space.  ",
    "def f(x):\n    return os.path.join(x). Next [SEP] sentence <s> here. [CLS] x.",
)


@dataclass(frozen=True)
class TokenizedDoc:
    """One document: `ids` of every sentence concatenated, sentence i is
    `ids[bounds[i]:bounds[i + 1]]`. No sentence is empty."""

    ids: np.ndarray
    bounds: np.ndarray

    def __len__(self) -> int:
        return len(self.bounds) - 1

    @property
    def num_tokens(self) -> int:
        return int(self.bounds[-1])

    def sentences(self) -> list[np.ndarray]:
        b = self.bounds
        return [self.ids[b[i] : b[i + 1]] for i in range(len(b) - 1)]


@dataclass(frozen=True)
class TokenizedBatch:
    """Documents tokenized together, flat. `ids` (int32 from the tokenizer, or narrower
    after `narrowed`) holds every token of every document in order; sentence s is
    `ids[sentences[s]:sentences[s + 1]]`; document d is sentences `documents[d]` to
    `documents[d + 1] - 1`. No sentence is empty; a document may have none (a text without
    a token)."""

    ids: np.ndarray
    sentences: np.ndarray
    documents: np.ndarray

    def __len__(self) -> int:
        return len(self.documents) - 1

    def to_arrays(self) -> list[np.ndarray]:
        return [self.ids, self.sentences, self.documents]

    @classmethod
    def from_arrays(cls, arrays: Sequence[np.ndarray]) -> TokenizedBatch:
        return cls(*arrays)

    def token_bounds(self) -> np.ndarray:
        """Where each document's tokens start in `ids`, and the total at the end."""
        return self.sentences[self.documents]

    def document(self, d: int) -> TokenizedDoc:
        lo, hi = self.documents[d], self.documents[d + 1]
        bounds = self.sentences[lo : hi + 1]
        return TokenizedDoc(self.ids[bounds[0] : bounds[-1]], bounds - bounds[0])

    def narrowed(self, dtype: str) -> TokenizedBatch:
        """The same documents with ids as `dtype` (a shard's token dtype, which holds every
        id of its vocabulary): half the bytes for vocabularies < 65536."""
        return replace(self, ids=self.ids.astype(dtype, copy=False))

    def select(self, docs: np.ndarray) -> TokenizedBatch:
        """The documents at indices `docs`, in that order."""
        docs = np.asarray(docs, dtype=np.int64)
        first, last = self.documents[docs], self.documents[docs + 1]
        kept = range_positions(first, last - first)  # the sentences, in their new order
        tokens = self.token_bounds()
        return TokenizedBatch(
            ids=gather(self.ids, tokens[docs], tokens[docs + 1] - tokens[docs]),
            sentences=offsets(np.diff(self.sentences)[kept]),
            documents=offsets(last - first),
        )

    @classmethod
    def from_lengths(
        cls, ids: np.ndarray, sentence_lengths: np.ndarray, per_document: np.ndarray
    ) -> TokenizedBatch:
        """From every sentence's length (zeros allowed: such sentences are dropped) and the
        number of sentences of each document."""
        keep = sentence_lengths > 0
        first = offsets(per_document)
        kept_before = offsets(keep.astype(np.int64))
        return cls(
            ids=ids.astype(ID_DTYPE, copy=False),
            sentences=offsets(sentence_lengths[keep]),
            documents=kept_before[first],
        )

    @classmethod
    def concat(cls, batches: Sequence[TokenizedBatch]) -> TokenizedBatch:
        if len(batches) == 1:
            return batches[0]
        token_shift = np.cumsum([0] + [len(b.ids) for b in batches[:-1]])
        sentence_shift = np.cumsum([0] + [len(b.sentences) - 1 for b in batches[:-1]])
        zero = [np.zeros(1, dtype=np.int64)]
        return cls(
            ids=np.concatenate([b.ids for b in batches]),
            sentences=np.concatenate(
                zero + [b.sentences[1:] + s for b, s in zip(batches, token_shift, strict=True)]
            ),
            documents=np.concatenate(
                zero + [b.documents[1:] + s for b, s in zip(batches, sentence_shift, strict=True)]
            ),
        )


class DocumentEncoder:
    """Tokenizes batches of documents, sentence by sentence, with one call of the fastest
    exact encoder per batch (corpus/vocab/fast.py; `tokenizers`' `encode_batch_fast`,
    documents marked and joined, where no faster one gives its ids). Built once per worker."""

    def __init__(
        self, tok: Tokenizer, language: str = DEFAULT_LANGUAGE, splitter: str = "sentencex"
    ) -> None:
        self.tok = _without_truncation(tok)
        self.language = language
        self.splitter = splitter
        # A faster encoder with the same ids (fast.py) encodes sentence by sentence; the
        # marked joining below only pays with `tokenizers`' own.
        self.encoder, self._flat = fast_encoder(self.tok)
        self.marked: Tokenizer | None = None
        if self.encoder != "tokenizers":
            return
        marked = Tokenizer.from_str(self.tok.to_str())
        marked.add_special_tokens([SENTENCE_MARK])
        mark_id = marked.token_to_id(SENTENCE_MARK)
        assert mark_id is not None  # just added
        self.mark_id = mark_id
        probes = [split_sentences(text, language) for text in _PROBES]
        expected = self._by_sentence(probes)
        got = _encode_marked(marked, self.mark_id, probes)
        self.marked = marked if got is not None and _same(got, expected) else None
        self.take_counts()  # the probes' are not the corpus'

    def take_counts(self) -> dict[str, int]:
        """The sentences each encoder took since the last call, by package, version and
        way (`{"tokie 0.1.4+split": 9120, "tokenizers 0.23.3": 31}`): what the manifest
        records of how the ids were made."""
        counts = {label: n for label, n in self._flat.counts.items() if n}
        self._flat.counts.update(dict.fromkeys(counts, 0))
        return counts

    def encode(self, texts: Sequence[str], split: bool = True) -> TokenizedBatch:
        """Every text, in order. `split=False` keeps each text as a single "sentence" (modes
        that ignore sentence boundaries). Sentences that encode to no token are dropped."""
        if not split:
            return self._by_sentence([[text] if text.strip() else [] for text in texts])
        sentences = [split_sentences(text, self.language, self.splitter) for text in texts]
        batch = None
        if self.marked is not None and not any(SENTENCE_MARK in text for text in texts):
            batch = _encode_marked(self.marked, self.mark_id, sentences)
            if batch is not None:
                self._flat.counts[self._flat.label] += int(_counts(sentences).sum())
        return batch if batch is not None else self._by_sentence(sentences)

    def _by_sentence(self, sentences: list[list[str]]) -> TokenizedBatch:
        pieces = list(chain.from_iterable(sentences))
        ids, lengths = self._flat(pieces)
        return TokenizedBatch.from_lengths(ids, lengths, _counts(sentences))


def _encode_marked(
    marked: Tokenizer, mark_id: int, sentences: list[list[str]]
) -> TokenizedBatch | None:
    """Each document's sentences joined by the mark, encoded, and cut at the marks' ids;
    None if the marks did not come back one per boundary."""
    flat, doc_lengths = tokenizers_encoder(marked)([SENTENCE_MARK.join(s) for s in sentences])
    per_document = _counts(sentences)
    is_mark = flat == mark_id
    marks = offsets(is_mark.astype(np.int64))  # marks before each position
    starts = offsets(doc_lengths)
    marks_per_doc = marks[starts[1:]] - marks[starts[:-1]]
    if not np.array_equal(marks_per_doc, np.maximum(per_document - 1, 0)):
        return None
    # sentence of every token: its document's first sentence + the marks before it there
    doc = np.repeat(np.arange(len(sentences)), doc_lengths)
    sentence = offsets(per_document)[doc] + marks[:-1] - marks[starts[doc]]
    keep = ~is_mark
    lengths = np.bincount(sentence[keep], minlength=int(per_document.sum()))
    return TokenizedBatch.from_lengths(flat[keep], lengths, per_document)


def _same(a: TokenizedBatch, b: TokenizedBatch) -> bool:
    return all(
        np.array_equal(x, y)
        for x, y in ((a.ids, b.ids), (a.sentences, b.sentences), (a.documents, b.documents))
    )


def _counts(nested: list[list[str]]) -> np.ndarray:
    return np.fromiter(map(len, nested), dtype=np.int64, count=len(nested))


def _without_truncation(tok: Tokenizer) -> Tokenizer:
    """A copy that neither truncates nor pads: a tokenizer.json may ask for either, and
    either would cut or pad sentences."""
    if tok.truncation is None and tok.padding is None:
        return tok
    copy = Tokenizer.from_str(tok.to_str())
    copy.no_truncation()
    copy.no_padding()
    return copy


def tokenize_documents(
    tok: Tokenizer,
    texts: Sequence[str],
    split: bool = True,
    language: str = DEFAULT_LANGUAGE,
) -> list[TokenizedDoc]:
    """Every text as a `TokenizedDoc`, in order (`DocumentEncoder.encode`, one document at
    a time; a text with no token gives a document of zero sentences)."""
    batch = DocumentEncoder(tok, language).encode(texts, split)
    return [batch.document(d) for d in range(len(batch))]
