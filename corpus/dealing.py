"""Dealing sequences to shards: a global shuffle without a global sort.

Every sequence gets a 64-bit key from (seed, identity). Keys fall into `2**bits` buckets by
their top bits; with the count of every bucket (a small table), a sequence's global rank is
the count of all smaller buckets plus its rank inside its bucket, which one worker computes
by sorting just that bucket. Rank r goes to shard r mod S at position r div S, so shards
differ in size by at most one and each is an i.i.d. sample of the corpus.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping

DEFAULT_BUCKET_BITS = 12


def sequence_key(seed: int, identity: str) -> int:
    """Uniform 64-bit key of a sequence, from the seed and a string naming the sequence."""
    digest = hashlib.blake2b(f"{seed}\x00{identity}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def bucket_of(key: int, bits: int = DEFAULT_BUCKET_BITS) -> int:
    return key >> (64 - bits)


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


def place(rank: int, shards: int) -> tuple[int, int]:
    """(shard, position inside the shard) of the sequence with global rank `rank`."""
    return rank % shards, rank // shards
