"""64-bit keys, and random numbers drawn from them, for whole arrays at once.

A document's key is a blake2b hash of (seed, document id): the one string hash a document
costs. Everything else the shard builder needs about a document (the shuffle keys of its
sequences, the group its tail or its pairs are made in, every random choice of its
sentence pairs) is derived from that key with splitmix64's finalizer in numpy. So it all
depends on the seed and the document alone, not on how documents were batched or on the
number of workers, and it costs a few vector operations per batch instead of a hash per
sequence.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
_DOUBLE_UNIT = 2.0**-53


def string_key(seed: int, identity: str) -> int:
    """Uniform 64-bit key of a string under a seed (blake2b)."""
    digest = hashlib.blake2b(f"{seed}\x00{identity}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def string_keys(seed: int, identities: Iterable[str]) -> np.ndarray:
    """`string_key` of every string, as a uint64 array."""
    return np.fromiter((string_key(seed, s) for s in identities), dtype=np.uint64)


def mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: a bijection of uint64 whose every output bit depends on every
    input bit. Arrays only (numpy warns about wrap-around on scalars, not on arrays)."""
    x = (x ^ (x >> np.uint64(30))) * _MUL1
    x = (x ^ (x >> np.uint64(27))) * _MUL2
    return x ^ (x >> np.uint64(31))


def derive(keys: np.ndarray, *fields: int | np.ndarray) -> np.ndarray:
    """Keys derived from `keys` and each field in turn (ints or arrays that broadcast
    against `keys`): as uniform and as unlikely to collide as fresh random keys."""
    h = np.atleast_1d(np.asarray(keys, dtype=np.uint64))
    for field in fields:
        if isinstance(field, (int, np.integer)):
            h = mix(h ^ np.uint64(_mixed_field(int(field))))
            continue
        f = np.atleast_1d(np.asarray(field))
        if f.dtype != np.uint64:
            f = f.astype(np.int64).astype(np.uint64)  # negative values wrap around
        h = mix(h ^ mix(f + _GOLDEN))
    return h


_MASK = (1 << 64) - 1


@functools.lru_cache(maxsize=4096)
def _mixed_field(field: int) -> int:
    """`mix(field + _GOLDEN)` of one int field, in Python ints: sentence pairs derive keys
    from a step number hundreds of times per batch, and nine numpy calls on a one-element
    array cost more than the rest of a step's arithmetic."""
    x = (field + int(_GOLDEN)) & _MASK  # negative fields wrap around, as in int64 -> uint64
    x = ((x ^ (x >> 30)) * int(_MUL1)) & _MASK
    x = ((x ^ (x >> 27)) * int(_MUL2)) & _MASK
    return x ^ (x >> 31)


def uniform(keys: np.ndarray) -> np.ndarray:
    """A float in [0, 1) per key, from its top 53 bits."""
    return (keys >> np.uint64(11)).astype(np.float64) * _DOUBLE_UNIT


def below(keys: np.ndarray, n: int | np.ndarray) -> np.ndarray:
    """An int64 in [0, n) per key (n >= 1 and below 2**40: the bias is under 2**-13)."""
    return (uniform(keys) * n).astype(np.int64)


def random_bits(keys: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """How many of `counts[i]` fair coin flips come up heads, per key: a Binomial(count,
    1/2) draw, as the popcount of `count` random bits."""
    counts = np.asarray(counts, dtype=np.int64)
    heads = np.zeros(len(keys), dtype=np.int64)
    for word in range(int(-(-counts.max() // 64)) if len(counts) else 0):
        bits = np.clip(counts - 64 * word, 0, 64).astype(np.uint64)
        draws = derive(keys, word)
        # keep the low `bits` bits; 64 bits is the whole word (a shift by 64 is undefined)
        masks = np.where(bits == 64, ~np.uint64(0), (np.uint64(1) << bits) - np.uint64(1))
        heads += np.bitwise_count(draws & masks).astype(np.int64)
    return heads
