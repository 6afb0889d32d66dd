"""Dealing sequences to shards: a global shuffle without a global sort.

Every sequence has a uniform 64-bit key (derived from its document's key, `corpus.shards.keys`).
Keys fall into `2**bits` buckets by their top bits; with the count of every bucket (a small
table), a sequence's global rank is the count of all smaller buckets plus its rank inside
its bucket, which one worker computes by sorting just that bucket. Rank r goes to shard
r mod S at position r div S, so shards differ in size by at most one and each is an i.i.d.
sample of the corpus.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

import numpy as np

from clozeworks.corpus.shards.instances import SequenceBatch

Rank = TypeVar("Rank", int, np.ndarray)

DEFAULT_BUCKET_BITS = 12
# A deal bucket holds about this much text (between it and twice it): what one worker
# sorts at once, whatever the corpus size, up to MAX_BUCKET_BITS (2**24 buckets: 256 TB).
DEAL_BUCKET_BYTES = 16 << 20
MAX_BUCKET_BITS = 24


def bucket_offsets(counts: Mapping[int, int]) -> dict[int, int]:
    """Bucket -> number of sequences in all smaller buckets."""
    offsets: dict[int, int] = {}
    running = 0
    for bucket in sorted(counts):
        offsets[bucket] = running
        running += counts[bucket]
    return offsets


def number_of_shards(total: int, num_shards: int | None, sequences_per_shard: int | None) -> int:
    """Shards to cut `total` sequences into: `num_shards`, or enough for the per-shard size."""
    if total <= 0:
        return 0
    if num_shards:
        return min(num_shards, total)
    per = sequences_per_shard or total
    return max(1, math.ceil(total / per))


def place(rank: Rank, shards: int) -> tuple[Rank, Rank]:
    """(shard, position inside the shard) of the sequence with global rank `rank` (or of
    each in an array of ranks)."""
    return rank % shards, rank // shards


def deal_bucket(
    batch: SequenceBatch, offset: int, shards: int
) -> Iterator[tuple[int, np.ndarray, SequenceBatch]]:
    """One bucket's sequences (all of them) dealt to shards: (shard, positions, sequences)
    for each shard they go to. `offset` is the number of sequences in all smaller buckets,
    so a sequence's rank is `offset` + its place in the bucket's key order."""
    order = key_order(batch.keys, functools.partial(_tiebreak, batch))
    shard_of, position = place(offset + np.arange(len(order), dtype=np.int64), shards)
    by_shard = np.argsort(shard_of, kind="stable")
    for part in np.split(by_shard, np.flatnonzero(np.diff(shard_of[by_shard])) + 1):
        if len(part):
            yield int(shard_of[part[0]]), position[part], batch.take(order[part])


def _tiebreak(batch: SequenceBatch) -> list[bytes]:
    pairs = zip(batch.sequences(), batch.copies.tolist(), strict=True)
    return [s.tobytes() + c.to_bytes(2, "big") for s, c in pairs]


def bucket_bits_for(total_bytes: int, bytes_per_bucket: int | None = None) -> int:
    """Bits of the bucket index for a corpus of `total_bytes` of text: a power of two of
    buckets holding `bytes_per_bucket` (DEAL_BUCKET_BYTES) to twice that each, as many as
    the corpus needs up to 2**MAX_BUCKET_BITS. Any value gives the same shards (a rank is
    a position in the global key order); it only sets how much one worker sorts at once."""
    buckets = max(1, total_bytes // (bytes_per_bucket or DEAL_BUCKET_BYTES))
    return min(MAX_BUCKET_BITS, max(0, int(buckets).bit_length() - 1))


def key_order(
    keys: np.ndarray, tiebreak: Callable[[], Sequence[bytes]] | None = None
) -> np.ndarray:
    """Indices that sort `keys` (uint64). Equal keys (a 64-bit collision: practically never)
    are ordered by `tiebreak()`'s bytes, so the order never depends on the order of arrival."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    if tiebreak is None or not np.any(ordered[1:] == ordered[:-1]):
        return order
    extra = tiebreak()
    return np.array(sorted(range(len(keys)), key=lambda i: (int(keys[i]), extra[i])))


def buckets_of(keys: np.ndarray, bits: int) -> np.ndarray:
    """Bucket of every uint64 key: its top `bits` bits."""
    if bits == 0:
        return np.zeros(len(keys), dtype=np.int64)
    return (keys >> np.uint64(64 - bits)).astype(np.int64)
