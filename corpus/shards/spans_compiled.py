"""SpanBERT's span loop and ALBERT's n-gram loop compiled for the CPU (numba), row by row:
the same draws, the same state and the same result as the lock-step tensor loops of
`spans.spanbert_spans` and `spans.albert_ngrams`, which stay the path on a GPU and wherever
numba is not installed.

On the CPU a tensor loop costs about 30 small operations per draw of a batch, most of
the time of span masking (3.8 of 5.0 ms for 64 x 128); here a row's draws are a few
scalar operations each. tests/corpus/shards/test_spans_compiled.py holds each pair equal
on random batches.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
import torch

AVAILABLE = importlib.util.find_spec("numba") is not None
_F = TypeVar("_F", bound=Callable[..., Any])


def _compiled(f: _F) -> _F:
    """`f` compiled by numba (kept on disk for the next process), or `f` itself without
    numba (then unused: the tensor loop runs)."""
    if not AVAILABLE:
        return f
    import numba

    return cast(_F, numba.njit(cache=True)(f))


_M32 = 0xFFFFFFFF
# The multipliers of counter_rng.mix32 as int64 factors with the same product mod 2**32.
_C1 = 0x7FEB352D
_C2 = 0x846CA68B - (1 << 32)
_UNIT = np.float32(1.0 / 16777216.0)


@_compiled
def _mix32(x: int) -> int:  # pragma: no cover - compiled
    x = x ^ (x >> 16)
    x = (x * _C1) & _M32
    x = x ^ (x >> 15)
    x = (x * _C2) & _M32
    return x ^ (x >> 16)


@_compiled
def _unit(bits: int) -> np.float32:  # pragma: no cover - compiled
    return np.float32(bits >> 8) * _UNIT


@_compiled
def _rows(  # pragma: no cover - compiled
    index: np.ndarray,  # [B, L] int64
    size: np.ndarray,  # [B, L + 1] int64
    words: np.ndarray,  # [B] int64
    candidates: np.ndarray,  # [B, L] int64
    n_maskable: np.ndarray,  # [B] int64
    budget: np.ndarray,  # [B] int64
    anchor_keys: np.ndarray,  # [B] int64
    length_keys: np.ndarray,  # [B] int64
    cdf: np.ndarray,  # [K] float32
    limit: int,
    taken: np.ndarray,  # [B, L + 1] bool, out
    owner: np.ndarray,  # [B, L + 1] int64, out
    cut_word: np.ndarray,  # [B] int64, out
    cut_len: np.ndarray,  # [B] int64, out
) -> None:
    b, length = index.shape
    longest = cdf.shape[0]
    for row in range(b):
        count = 0
        step = 0
        while step < limit and count < budget[row]:
            u = _unit(_mix32(anchor_keys[row] ^ step))
            r = int(u * np.float32(n_maskable[row]))
            r = min(r, length - 1)
            start = index[row, candidates[row, r]]
            draw = _unit(_mix32(length_keys[row] ^ step))
            span = 1
            for k in range(longest - 1):
                if draw >= cdf[k]:
                    span += 1
            if not taken[row, start]:
                room = budget[row] - count
                after = 0
                added = 0
                for k in range(longest):
                    word = start + k
                    if k >= span or word >= words[row]:
                        continue  # the sink column: nothing to add
                    if taken[row, word]:
                        continue
                    fresh = size[row, word]
                    if fresh <= 0:
                        continue
                    after += fresh
                    if after <= room:
                        taken[row, word] = True
                        owner[row, word] = start
                        added += fresh
                    elif after - fresh < room:
                        owner[row, word] = start
                        cut_word[row] = word
                        cut_len[row] = room - after + fresh
                        added += room - after + fresh
                count += added
            step += 1


@_compiled
def _ngram_rows(  # pragma: no cover - compiled
    size: np.ndarray,  # [B, L + 1] int64
    words: np.ndarray,  # [B] int64
    visit: np.ndarray,  # [B, W] int64, the words in visiting order
    budget: np.ndarray,  # [B] int64
    length_keys: np.ndarray,  # [B] int64
    cdf: np.ndarray,  # [K] float32
    taken: np.ndarray,  # [B, L + 1] bool, out
    owner: np.ndarray,  # [B, L + 1] int64, out
) -> None:
    b = size.shape[0]
    longest = cdf.shape[0]
    gram = np.zeros(longest, dtype=np.int64)
    for row in range(b):
        count = 0
        step = 0
        while count < budget[row] and step < words[row]:
            start = visit[row, step]
            draw = _unit(_mix32(length_keys[row] ^ step))
            n = 1
            for k in range(longest - 1):
                if draw >= cdf[k]:
                    n += 1
            room = budget[row] - count
            total = 0
            fit = 0
            for k in range(longest):
                if start + k < words[row]:
                    total += size[row, start + k]
                gram[k] = total
                if k < n and total <= room:
                    fit += 1
            inside = min(fit, words[row] - start)
            free = fit > 0
            for k in range(inside):
                if taken[row, start + k]:
                    free = False
            if free:
                for k in range(inside):
                    taken[row, start + k] = True
                    owner[row, start + k] = start
                count += gram[fit - 1]
            step += 1


def ngram_rows(
    size: torch.Tensor,
    words: torch.Tensor,
    visit: torch.Tensor,
    budget: torch.Tensor,
    length_keys: torch.Tensor,
    cdf: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(taken [B, L + 1], owner [B, L + 1]) of CPU tensors, as `spans.albert_ngrams`'s
    loop leaves them (the sink column aside)."""
    b, width = size.shape
    taken = np.zeros((b, width), dtype=np.bool_)
    owner = np.zeros((b, width), dtype=np.int64)
    _ngram_rows(
        _ints(size),
        _ints(words),
        _ints(visit),
        _ints(budget),
        _ints(length_keys),
        np.ascontiguousarray(cdf.numpy(), dtype=np.float32),
        taken,
        owner,
    )
    return torch.from_numpy(taken), torch.from_numpy(owner)


def spanbert_rows(
    index: torch.Tensor,
    size: torch.Tensor,
    words: torch.Tensor,
    candidates: torch.Tensor,
    n_maskable: torch.Tensor,
    budget: torch.Tensor,
    anchor_keys: torch.Tensor,
    length_keys: torch.Tensor,
    cdf: torch.Tensor,
    limit: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(taken [B, L + 1], owner [B, L + 1], cut_word [B], cut_len [B]) of CPU tensors, as
    `spans.spanbert_spans`'s loop leaves them."""
    b, length = index.shape
    taken = np.zeros((b, length + 1), dtype=np.bool_)
    owner = np.zeros((b, length + 1), dtype=np.int64)
    cut_word = np.full(b, length, dtype=np.int64)
    cut_len = np.zeros(b, dtype=np.int64)
    _rows(
        _ints(index),
        _ints(size),
        _ints(words),
        _ints(candidates),
        _ints(n_maskable),
        _ints(budget),
        _ints(anchor_keys),
        _ints(length_keys),
        np.ascontiguousarray(cdf.numpy(), dtype=np.float32),
        limit,
        taken,
        owner,
        cut_word,
        cut_len,
    )
    return (
        torch.from_numpy(taken),
        torch.from_numpy(owner),
        torch.from_numpy(cut_word),
        torch.from_numpy(cut_len),
    )


def _ints(t: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.numpy(), dtype=np.int64)
