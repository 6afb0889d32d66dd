"""Counter-based random numbers: a 32-bit integer hash of (sequence key, counter, stream).

Masks, span draws and the trainer's shuffles take their randomness from here instead of a
generator's state, so a sequence's draws depend only on (seed, epoch, global sequence
index): not on which batch, worker or device it lands on, and a resumed run sees exactly
the draws the uninterrupted run would.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import torch

_M32 = 0xFFFFFFFF
_GOLDEN = 0x9E3779B9


_Ints = TypeVar("_Ints", torch.Tensor, np.ndarray)  # int64 either way


def _mul32(x: _Ints, c: int) -> _Ints:
    """(x * c) mod 2**32 for 32-bit x held in int64, without signed overflow: c - 2**32 is
    the same multiplier mod 2**32 and fits 31 bits, so |x * c| < 2**63."""
    return (x * (c - (1 << 32) if c >= 1 << 31 else c)) & _M32


def mix32(x: _Ints) -> _Ints:
    """Chris Wellons' lowbias32 integer hash: good avalanche, cheap, exact on any device."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def sequence_keys(seed: int, epoch: int, indices: torch.Tensor) -> torch.Tensor:
    """A 32-bit key per sequence from (seed, epoch, global sequence index). [B] int64."""
    return torch.from_numpy(sequence_keys_array(seed, epoch, indices.cpu().numpy())).to(
        indices.device
    )


def sequence_keys_array(seed: int, epoch: int, indices: np.ndarray) -> np.ndarray:
    """`sequence_keys` on a numpy array (what the loader uses: small arrays are faster here)."""
    idx = indices.astype(np.int64)
    start = int(mix32(np.array([(seed & _M32) ^ 0x5BD1E995], dtype=np.int64))[0])
    h = mix32(np.full_like(idx, start) ^ ((seed >> 32) & _M32))
    h = mix32(h ^ (epoch & _M32))
    h = mix32(h ^ (idx & _M32))
    return mix32(h ^ ((idx >> 32) & _M32))


def stream_keys(keys: torch.Tensor, streams: tuple[int, ...]) -> torch.Tensor:
    """[B, S]: one 32-bit key per (sequence, stream), itself a uniform random number."""
    cache_key = (streams, keys.device)
    salts = _SALTS.get(cache_key)
    if salts is None:
        salts = torch.tensor([(s * _GOLDEN) & _M32 for s in streams], device=keys.device)
        _SALTS[cache_key] = salts
    return mix32(keys[:, None] ^ salts)


_SALTS: dict[tuple[tuple[int, ...], torch.device], torch.Tensor] = {}


def row_bits(keys: torch.Tensor, length: int) -> torch.Tensor:
    """[B, length] 32 random bits per (stream key, position); keys [B], one stream's."""
    positions = torch.arange(length, device=keys.device)
    return mix32(keys[:, None] ^ positions)


def pair_bits(keys: torch.Tensor, counters: torch.Tensor | int) -> torch.Tensor:
    """Bits for (stream key, counter) pairs (broadcast): the values `row_bits` gives them."""
    return mix32(keys ^ counters)


def random_bits(keys: torch.Tensor, length: int, stream: int) -> torch.Tensor:
    """[B, length] int64 of 32 random bits per (sequence key, position, stream).

    Position i's value does not depend on `length`, so padding never changes it. Streams
    1..99 are corpus.shards.masking's; the trainer's word-structure shuffle uses 100 and up.
    """
    return row_bits(stream_keys(keys, (stream,))[:, 0], length)


def to_unit_interval(bits: torch.Tensor) -> torch.Tensor:
    """32-bit ints -> float32 in [0, 1). Uses the top 24 bits, so every value is exact."""
    return (bits >> 8).to(torch.float32) * (1.0 / 16777216.0)
