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
