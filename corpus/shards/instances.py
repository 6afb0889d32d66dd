"""Training sequences from tokenized documents, built a whole batch at a time.

Packed modes (RoBERTa's FULL-SENTENCES and DOC-SENTENCES, SpanBERT's single segments):
whole sentences are appended while they fit in `max_seq_len - 2` content tokens, then
`[CLS] ... [SEP]` is put around them. A sentence longer than that is cut into pieces rather
than dropped, so every token of every document lands in exactly one sequence.

A chunk of one document is a contiguous range of the batch's flat ids, so packing works on
sentence lengths (ints) and yields cut points; the sequences are then cut out of the flat
array with index arithmetic (`corpus.shards.ranges`), never one array per sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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


def pack_sentences(lengths: Sequence[int], capacity: int) -> list[int]:
    """Greedy packing of one document's sentences, by length: where each chunk ends, as a
    token offset from the document's start (the last is the document's length).

    Sentences are taken in order while the chunk holds at most `capacity` tokens; a
    sentence longer than `capacity` is cut into `capacity`-long pieces first.
    """
    ends: list[int] = []
    position = used = 0
    for length in lengths:
        for start in range(0, length, capacity):
            piece = min(capacity, length - start)
            if used + piece > capacity and used:
                ends.append(position)
                used = 0
            used += piece
            position += piece
    if used:
        ends.append(position)
    return ends


def chunk_bounds(batch: TokenizedBatch, capacity: int) -> np.ndarray:
    """Every document of `batch` packed (`pack_sentences`): the offsets in `batch.ids` where
    chunks start, then the total. Chunk c is `ids[b[c]:b[c + 1]]`; none crosses a document,
    none is empty."""
    doc_bounds = batch.token_bounds()
    cuts = [doc_bounds]
    for d in np.flatnonzero(np.diff(doc_bounds) > capacity).tolist():
        first, last = batch.documents[d], batch.documents[d + 1]
        lengths = np.diff(batch.sentences[first : last + 1]).tolist()
        cuts.append(doc_bounds[d] + np.array(pack_sentences(lengths, capacity), dtype=np.int64))
    return np.unique(np.concatenate(cuts))


def pack_with_separators(sizes: Sequence[int], capacity: int) -> list[int]:
    """FULL-SENTENCES across documents: items (each at most `capacity`) taken in order while
    they fit with one separator token between neighbours. The index of each pack's first
    item."""
    firsts: list[int] = []
    used = 0
    for i, size in enumerate(sizes):
        if not firsts or used + 1 + size > capacity:
            firsts.append(i)
            used = size
        else:
            used += 1 + size
    return firsts


def pack_tails(
    tokens: np.ndarray, bounds: np.ndarray, capacity: int, sep: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tails `tokens[bounds[i]:bounds[i + 1]]` (each 1..capacity tokens) packed in order with
    `sep` between documents: (stream, starts, ends), pack p's content being
    `stream[starts[p]:ends[p]]`."""
    sizes = np.diff(bounds)
    firsts = np.array(pack_with_separators(sizes.tolist(), capacity), dtype=np.int64)
    lasts = np.append(firsts[1:] - 1, len(sizes) - 1)
    stream = np.insert(tokens, bounds[1:], sep)  # a separator after every tail
    item_starts = bounds[:-1] + np.arange(len(sizes))
    return stream, item_starts[firsts], item_starts[lasts] + sizes[lasts]


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
    copy. One pickled batch costs about what its arrays do, where one element per sequence
    costs Beam tens of microseconds each.
    """

    keys: np.ndarray
    tokens: np.ndarray
    offsets: np.ndarray
    segments: np.ndarray
    labels: np.ndarray
    copies: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)

    def to_arrays(self) -> list[np.ndarray]:
        return [self.keys, self.tokens, self.offsets, self.segments, self.labels, self.copies]

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
    ) -> SequenceBatch:
        """Sequence i = `tokens[bounds[i]:bounds[i + 1]]`, with its key, all of copy `copy`."""
        n = len(keys)
        return cls(
            keys=np.asarray(keys, dtype=np.uint64),
            tokens=tokens.astype(token_dtype, copy=False),
            offsets=np.asarray(bounds, dtype=np.int64),
            segments=np.full(n, -1, np.int16) if segments is None else segments.astype(np.int16),
            labels=np.full(n, -1, np.int8) if labels is None else labels.astype(np.int8),
            copies=np.full(n, copy, dtype=np.int16),
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
        return SequenceBatch(
            keys=self.keys[index],
            tokens=ranges.gather(self.tokens, starts, lengths),
            offsets=ranges.offsets(lengths),
            segments=self.segments[index],
            labels=self.labels[index],
            copies=self.copies[index],
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
        return cls(
            keys=np.concatenate([b.keys for b in batches]),
            tokens=np.concatenate([b.tokens for b in batches]),
            offsets=bounds,
            segments=np.concatenate([b.segments for b in batches]),
            labels=np.concatenate([b.labels for b in batches]),
            copies=np.concatenate([b.copies for b in batches]),
        )
