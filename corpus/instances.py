"""Training sequences from tokenized documents.

Packed modes (RoBERTa's FULL-SENTENCES and DOC-SENTENCES): whole sentences are appended
while they fit in `max_seq_len - 2` content tokens, then `[CLS] ... [SEP]` is put around
them. A sentence longer than that is cut into pieces rather than dropped, so every token of
every document lands in exactly one sequence.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Specials:
    cls: int
    sep: int


def content_capacity(max_seq_len: int) -> int:
    """Content tokens a single-segment sequence holds: max length minus [CLS] and [SEP]."""
    if max_seq_len < 8:
        raise ValueError(f"max_seq_len must be at least 8, got {max_seq_len}")
    return max_seq_len - 2


def _pieces(sentence: np.ndarray, capacity: int) -> Iterator[np.ndarray]:
    for start in range(0, len(sentence), capacity):
        yield sentence[start : start + capacity]


def pack_document(sentences: Sequence[np.ndarray], capacity: int) -> list[list[np.ndarray]]:
    """Group one document's sentences into chunks of at most `capacity` tokens, in order.

    Each chunk is a list of sentence pieces; the last chunk may be short.
    """
    chunks: list[list[np.ndarray]] = []
    current: list[np.ndarray] = []
    used = 0
    for sentence in sentences:
        if len(sentence) == 0:
            continue
        for piece in _pieces(sentence, capacity):
            if used + len(piece) > capacity and current:
                chunks.append(current)
                current, used = [], 0
            current.append(piece)
            used += len(piece)
    if current:
        chunks.append(current)
    return chunks


def pack_across_documents(
    tails: Iterable[Sequence[np.ndarray]], capacity: int, doc_sep: int
) -> list[list[np.ndarray]]:
    """FULL-SENTENCES across documents: pack the given per-document chunks (each at most
    `capacity` tokens) together, with `doc_sep` between documents, greedily in order."""
    chunks: list[list[np.ndarray]] = []
    current: list[np.ndarray] = []
    used = 0
    sep = np.array([doc_sep], dtype=np.int64)
    for tail in tails:
        size = sum(len(p) for p in tail)
        if size == 0:
            continue
        extra = 1 if current else 0
        if current and used + extra + size > capacity:
            chunks.append(current)
            current, used, extra = [], 0, 0
        if extra:
            current.append(sep)
        current.extend(tail)
        used += extra + size
    if current:
        chunks.append(current)
    return chunks


def single_sequence(chunk: Sequence[np.ndarray], specials: Specials) -> np.ndarray:
    """`[CLS] chunk [SEP]` as one int64 array."""
    parts = [np.array([specials.cls], dtype=np.int64)]
    parts.extend(np.asarray(p, dtype=np.int64) for p in chunk)
    parts.append(np.array([specials.sep], dtype=np.int64))
    return np.concatenate(parts)


def chunk_tokens(chunk: Sequence[np.ndarray]) -> int:
    return sum(len(p) for p in chunk)


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

    def sequence(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]

    def sequences(self) -> list[np.ndarray]:
        o = self.offsets
        return [self.tokens[o[i] : o[i + 1]] for i in range(len(self))]

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
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum([len(s) for s in sequences], out=offsets[1:])
        tokens = (
            np.concatenate(sequences).astype(token_dtype, copy=False)
            if n
            else np.zeros(0, dtype=token_dtype)
        )
        return cls(
            keys=np.fromiter(keys, dtype=np.uint64, count=n),
            tokens=tokens,
            offsets=offsets,
            segments=np.asarray(segments if segments is not None else [-1] * n, dtype=np.int16),
            labels=np.asarray(labels if labels is not None else [-1] * n, dtype=np.int8),
            copies=np.asarray(copies if copies is not None else [0] * n, dtype=np.int16),
        )

    def take(self, index: np.ndarray) -> SequenceBatch:
        """The sequences at `index`, in that order."""
        lengths = np.diff(self.offsets)[index]
        offsets = np.zeros(len(index) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        starts = self.offsets[:-1][index]
        # positions of every kept token: for each sequence, start .. start + length
        gather = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
        return SequenceBatch(
            keys=self.keys[index],
            tokens=self.tokens[gather],
            offsets=offsets,
            segments=self.segments[index],
            labels=self.labels[index],
            copies=self.copies[index],
        )

    @classmethod
    def concat(cls, batches: Sequence[SequenceBatch]) -> SequenceBatch:
        if len(batches) == 1:
            return batches[0]
        shifts = np.cumsum([0] + [int(b.offsets[-1]) for b in batches[:-1]])
        offsets = np.concatenate(
            [np.zeros(1, dtype=np.int64)]
            + [b.offsets[1:] + s for b, s in zip(batches, shifts, strict=True)]
        )
        return cls(
            keys=np.concatenate([b.keys for b in batches]),
            tokens=np.concatenate([b.tokens for b in batches]),
            offsets=offsets,
            segments=np.concatenate([b.segments for b in batches]),
            labels=np.concatenate([b.labels for b in batches]),
            copies=np.concatenate([b.copies for b in batches]),
        )
