"""Training sequences from tokenized documents, built a whole batch at a time.

Packed modes (RoBERTa's FULL-SENTENCES and DOC-SENTENCES, SpanBERT's single segments):
whole sentences are appended while they fit in `max_seq_len - 2` content tokens, then
`[CLS] ... [SEP]` is put around them. A sentence longer than that is cut into pieces rather
than dropped, so every token of every document lands in exactly one sequence. Both are
fairseq's TokenBlockDataset packing, which RoBERTa used: DOC-SENTENCES is its
`complete_doc` on each document, FULL-SENTENCES its `complete` over a stream of
documents with a separator between them (`pack_stream`).

A chunk of one document is a contiguous range of the batch's flat ids, so packing works on
sentence lengths (ints) and yields cut points; the sequences are then cut out of the flat
array with index arithmetic (`corpus.shards.ranges`), never one array per sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from clozeworks.corpus.shards import ranges
from clozeworks.corpus.shards.tokenize import TokenizedBatch


@dataclass(frozen=True)
class Specials:
    cls: int
    sep: int


def content_capacity(max_seq_len: int) -> int:
    """Content tokens a single-segment sequence holds: max length minus [CLS] and [SEP]."""
    if max_seq_len < 8:
        raise ValueError(f"max_seq_len must be at least 8, got {max_seq_len}")
    return max_seq_len - 2


def greedy_firsts(sizes: Sequence[int], capacity: int) -> list[int]:
    """fairseq's TokenBlockDataset loop: items taken in order while a block holds at most
    `capacity` (an item larger than that is a block of its own). The index of each block's
    first item. Sequential by nature."""
    firsts: list[int] = []
    used = 0
    for i, size in enumerate(sizes):
        if not firsts or (used and used + size > capacity):
            firsts.append(i)
            used = 0
        used += size
    return firsts


def pack_sentences(lengths: Sequence[int], capacity: int, cut: bool = True) -> list[int]:
    """Greedy packing of one document's sentences, by length: where each chunk ends, as a
    token offset from the document's start (the last is the document's length).

    Sentences are taken in order while the chunk holds at most `capacity` tokens; a
    sentence longer than `capacity` is cut into `capacity`-long pieces first, or with
    `cut=False` (fairseq's) is a chunk of its own, longer than `capacity`.
    """
    step = capacity if cut else max(capacity, *lengths, 1)
    pieces = [min(step, length - start) for length in lengths for start in range(0, length, step)]
    bounds = list(accumulate(pieces, initial=0))
    firsts = greedy_firsts(pieces, capacity)
    return [bounds[i] for i in firsts[1:]] + bounds[-1:] if pieces else []


def word_cuts(ids: np.ndarray, capacity: int, word_start: np.ndarray | None) -> list[int]:
    """The sizes of the pieces an over-long sentence `ids` is cut into: at most `capacity`
    each, and with `word_start` (per id, does the piece begin a word) each cut before the
    last word start that fits, so no piece but one of a word longer than `capacity` begins
    inside a word (a `##` piece)."""
    starts = None if word_start is None else word_start[ids]
    sizes, start, n = [], 0, len(ids)
    while n - start > capacity:
        end = start + capacity
        if starts is not None:
            fits = np.flatnonzero(starts[start + 1 : end + 1])
            if len(fits):
                end = start + 1 + int(fits[-1])
        sizes.append(end - start)
        start = end
    return [*sizes, n - start]


def sentence_pieces(
    batch: TokenizedBatch, capacity: int, word_start: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Every sentence of `batch` as the pieces packing takes: itself, or where longer than
    `capacity` its `word_cuts`. (pieces per sentence, piece sizes in order)."""
    lengths = np.diff(batch.sentences)
    counts = np.maximum(1, -(-lengths // capacity))  # ceil; no sentence is empty
    long = np.flatnonzero(lengths > capacity)
    if word_start is None or not len(long):
        sentence = np.repeat(np.arange(len(lengths)), counts)
        nth = np.arange(len(sentence)) - ranges.offsets(counts)[:-1][sentence]
        return counts, np.minimum(capacity, lengths[sentence] - nth * capacity)
    cut = {
        s: word_cuts(batch.ids[batch.sentences[s] : batch.sentences[s + 1]], capacity, word_start)
        for s in long.tolist()
    }
    counts[long] = [len(cut[s]) for s in long.tolist()]
    first = ranges.offsets(counts)[:-1]
    sizes = np.empty(int(counts.sum()), dtype=np.int64)
    sizes[first] = lengths
    for s, pieces in cut.items():
        sizes[first[s] : first[s] + len(pieces)] = pieces
    return counts, sizes


def chunk_bounds(
    batch: TokenizedBatch, capacity: int, cut: bool = True, word_start: np.ndarray | None = None
) -> np.ndarray:
    """Every document of `batch` packed (`pack_sentences`): the offsets in `batch.ids` where
    chunks start, then the total. Chunk c is `ids[b[c]:b[c + 1]]`; none crosses a document,
    none is empty; with `cut=False` an over-long sentence is a chunk longer than `capacity`;
    with `word_start` an over-long sentence is cut between words (`word_cuts`)."""
    doc_bounds = batch.token_bounds()
    cuts = [doc_bounds]
    pieces = None
    if cut and word_start is not None:
        counts, sizes = sentence_pieces(batch, capacity, word_start)
        first_piece = ranges.offsets(counts)
    for d in np.flatnonzero(np.diff(doc_bounds) > capacity).tolist():
        first, last = batch.documents[d], batch.documents[d + 1]
        if cut and word_start is not None:
            pieces = sizes[first_piece[first] : first_piece[last]].tolist()
            bounds = list(accumulate(pieces, initial=0))
            firsts = greedy_firsts(pieces, capacity)
            ends = [bounds[i] for i in firsts[1:]] + bounds[-1:] if pieces else []
        else:
            lengths = np.diff(batch.sentences[first : last + 1]).tolist()
            ends = pack_sentences(lengths, capacity, cut)
        cuts.append(doc_bounds[d] + np.array(ends, dtype=np.int64))
    return np.unique(np.concatenate(cuts))


def stream_items(
    batch: TokenizedBatch, capacity: int, cut: bool = True, word_start: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """FULL-SENTENCES' stream of `batch`'s documents as items: every sentence (cut into
    pieces of at most `capacity` where longer, unless not `cut`: `sentence_pieces`) and a
    1-token separator between documents, in order; they tile `separated(batch, sep)`.
    (sizes, which items are separators)."""
    lengths = np.diff(batch.sentences)
    if not cut:
        capacity = max(capacity, int(lengths.max(initial=1)))
    pieces, sizes = sentence_pieces(batch, capacity, word_start if cut else None)
    sentence = np.repeat(np.arange(len(lengths)), pieces)
    per_doc = np.diff(batch.documents)  # sentences; 0 for a document without tokens
    doc_of_piece = np.repeat(np.arange(len(per_doc)), per_doc)[sentence]
    through = np.cumsum(np.bincount(doc_of_piece, minlength=len(per_doc)))
    between = through[per_doc > 0][:-1]  # after each document with tokens but the last
    return np.insert(sizes, between, 1), np.insert(np.zeros(len(sizes), bool), between, True)


def separated(batch: TokenizedBatch, sep: int) -> np.ndarray:
    """`batch`'s tokens with `sep` between documents (documents without tokens skipped)."""
    bounds = np.unique(batch.token_bounds())  # documents without tokens share a bound
    return np.insert(batch.ids, bounds[1:-1], sep)


def pack_stream(
    batch: TokenizedBatch,
    capacity: int,
    sep: int,
    cut: bool = True,
    word_start: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """FULL-SENTENCES as fairseq's `TokenBlockDataset(break_mode="complete")` builds it for
    RoBERTa: the documents' sentences in one stream, with a separator between documents,
    taken in order while they fit in `capacity`; a block starts where the one before
    ended, so a document's first sentences fill the rest of the block before it. Where
    fairseq makes an over-long sentence one over-long block (refused later, as longer than
    the model takes), it is cut into `capacity` pieces here, and a block that would hold
    nothing but a separator (before such a piece) is not made; `cut=False` is fairseq's,
    with the over-long blocks left out. (stream, starts, ends): block b is
    `stream[starts[b]:ends[b]]`. With `word_start` (per id, whether the piece begins a
    word) an over-long sentence is cut between words, so no block begins with a `##`
    piece but where one word is longer than a block."""
    sizes, is_separator = stream_items(batch, capacity, cut, word_start)
    firsts = np.array(greedy_firsts(sizes.tolist(), capacity), dtype=np.int64)
    bounds = ranges.offsets(sizes)
    nexts = np.append(firsts[1:], len(sizes))[: len(firsts)].astype(np.int64)
    starts, ends = bounds[firsts], bounds[nexts]
    keep = ~(is_separator[firsts] & (ends - starts == 1)) & (ends - starts <= capacity)
    return separated(batch, sep), starts[keep], ends[keep]


def single_sequences(
    source: np.ndarray, starts: np.ndarray, ends: np.ndarray, specials: Specials
) -> tuple[np.ndarray, np.ndarray]:
    """`[CLS] source[starts[i]:ends[i]] [SEP]` for every i: (tokens, offsets), sequence i
    being `tokens[offsets[i]:offsets[i + 1]]`."""
    lengths = np.asarray(ends - starts, dtype=np.int64)
    bounds = ranges.offsets(lengths + 2)
    tokens = np.empty(bounds[-1], dtype=source.dtype)
    tokens[bounds[:-1]] = specials.cls
    tokens[bounds[1:] - 1] = specials.sep
    content = ranges.range_positions(bounds[:-1] + 1, lengths)
    tokens[content] = ranges.gather(source, starts, lengths)
    return tokens, bounds


@dataclass(frozen=True)
class SequenceBatch:
    """Many training sequences in a few arrays: what travels between Beam stages.

    Sequence i is `tokens[offsets[i]:offsets[i + 1]]`; `keys` (uint64) order the global
    shuffle; `segments` / `labels` are -1 outside pair modes; `copies` is the dupe-factor
    copy; with provenance, sequence i holds the documents whose keys are
    `docs[doc_offsets[i]:doc_offsets[i + 1]]`, in the order their tokens come. One pickled
    batch costs about what its arrays do, where one element per sequence costs Beam tens of
    microseconds each.
    """

    keys: np.ndarray
    tokens: np.ndarray
    offsets: np.ndarray
    segments: np.ndarray
    labels: np.ndarray
    copies: np.ndarray
    docs: np.ndarray | None = None
    doc_offsets: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def to_arrays(self) -> list[np.ndarray]:
        arrays = [self.keys, self.tokens, self.offsets, self.segments, self.labels, self.copies]
        if self.docs is not None and self.doc_offsets is not None:
            arrays += [self.docs, self.doc_offsets]
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Sequence[np.ndarray]) -> SequenceBatch:
        return cls(*arrays)

    def sequence(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]

    def sequences(self) -> list[np.ndarray]:
        o = self.offsets
        return [self.tokens[o[i] : o[i + 1]] for i in range(len(self))]

    @classmethod
    def of(
        cls,
        keys: np.ndarray,
        tokens: np.ndarray,
        bounds: np.ndarray,
        token_dtype: str,
        copy: int = 0,
        segments: np.ndarray | None = None,
        labels: np.ndarray | None = None,
        docs: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> SequenceBatch:
        """Sequence i = `tokens[bounds[i]:bounds[i + 1]]`, with its key, all of copy `copy`;
        `docs`: (document keys, offsets) when the sequences' documents are recorded."""
        n = len(keys)
        return cls(
            keys=np.asarray(keys, dtype=np.uint64),
            tokens=tokens.astype(token_dtype, copy=False),
            offsets=np.asarray(bounds, dtype=np.int64),
            segments=np.full(n, -1, np.int16) if segments is None else segments.astype(np.int16),
            labels=np.full(n, -1, np.int8) if labels is None else labels.astype(np.int8),
            copies=np.full(n, copy, dtype=np.int16),
            docs=None if docs is None else np.asarray(docs[0], dtype=np.uint64),
            doc_offsets=None if docs is None else np.asarray(docs[1], dtype=np.int64),
        )

    @classmethod
    def build(
        cls,
        keys: Sequence[int],
        sequences: Sequence[np.ndarray],
        token_dtype: str,
        segments: Sequence[int] | None = None,
        labels: Sequence[int] | None = None,
        copies: Sequence[int] | None = None,
    ) -> SequenceBatch:
        n = len(keys)
        tokens = (
            np.concatenate(sequences).astype(token_dtype, copy=False)
            if n
            else np.zeros(0, dtype=token_dtype)
        )
        return cls(
            keys=np.fromiter(keys, dtype=np.uint64, count=n),
            tokens=tokens,
            offsets=ranges.offsets(np.array([len(s) for s in sequences], dtype=np.int64)),
            segments=np.asarray(segments if segments is not None else [-1] * n, dtype=np.int16),
            labels=np.asarray(labels if labels is not None else [-1] * n, dtype=np.int8),
            copies=np.asarray(copies if copies is not None else [0] * n, dtype=np.int16),
        )

    def take(self, index: np.ndarray) -> SequenceBatch:
        """The sequences at `index`, in that order."""
        starts = self.offsets[:-1][index]
        lengths = self.offsets[1:][index] - starts
        docs = doc_offsets = None
        if self.docs is not None and self.doc_offsets is not None:
            first = self.doc_offsets[:-1][index]
            counts = self.doc_offsets[1:][index] - first
            docs, doc_offsets = ranges.gather(self.docs, first, counts), ranges.offsets(counts)
        return SequenceBatch(
            keys=self.keys[index],
            tokens=ranges.gather(self.tokens, starts, lengths),
            offsets=ranges.offsets(lengths),
            segments=self.segments[index],
            labels=self.labels[index],
            copies=self.copies[index],
            docs=docs,
            doc_offsets=doc_offsets,
        )

    @classmethod
    def concat(cls, batches: Sequence[SequenceBatch]) -> SequenceBatch:
        if len(batches) == 1:
            return batches[0]
        shifts = np.cumsum([0] + [int(b.offsets[-1]) for b in batches[:-1]])
        bounds = np.concatenate(
            [np.zeros(1, dtype=np.int64)]
            + [b.offsets[1:] + s for b, s in zip(batches, shifts, strict=True)]
        )
        docs = doc_offsets = None
        held = [(b.docs, b.doc_offsets) for b in batches]
        if all(d is not None and o is not None for d, o in held):
            docs = np.concatenate([d for d, _ in held if d is not None])
            doc_offsets = ranges.offsets(
                np.concatenate([np.diff(o) for _, o in held if o is not None])
            )
        return cls(
            keys=np.concatenate([b.keys for b in batches]),
            tokens=np.concatenate([b.tokens for b in batches]),
            offsets=bounds,
            segments=np.concatenate([b.segments for b in batches]),
            labels=np.concatenate([b.labels for b in batches]),
            copies=np.concatenate([b.copies for b in batches]),
            docs=docs,
            doc_offsets=doc_offsets,
        )
