"""Word, n-gram and span selection compiled for the CPU (numba), row by row: the same
draws and the same masks as `spans.py`'s lock-step tensor loops, which stay the path on a
GPU and wherever numba is not installed.

On the CPU a tensor loop costs about 30 small operations per draw of a batch, and even
whole-word masking's one cumulative sum needs a sort, a word table and a dozen gathers
and scatters over [B, L]: most of the time of masking by words. Here a row is built,
ordered and walked in a few scalar operations per position and per draw.
tests/corpus/shards/test_spans_compiled.py holds each kind equal to the tensor loops on
random batches.
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
    numba (then unused: the tensor loops run)."""
    if not AVAILABLE:
        return f
    import numba

    return cast(_F, numba.njit(cache=True)(f))


_M32 = 0xFFFFFFFF
# The multipliers of counter_rng.mix32 as int64 factors with the same product mod 2**32.
_C1 = 0x7FEB352D
_C2 = 0x846CA68B - (1 << 32)
_UNIT = np.float32(1.0 / 16777216.0)
_LOW20 = 0xFFFFF
WHOLE_WORDS, NGRAMS, SPANS = 0, 1, 2


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
def _draw_length(key: int, step: int, cdf: np.ndarray) -> int:  # pragma: no cover
    """`spans.draw_lengths` for one row."""
    u = _unit(_mix32(key ^ step))
    n = 1
    for k in range(cdf.shape[0] - 1):
        if u >= cdf[k]:
            n += 1
    return n


@_compiled
def _table(
    word_of: np.ndarray, maskable: np.ndarray, size: np.ndarray, first: np.ndarray
) -> int:  # pragma: no cover - compiled
    """`spans.WordTable.build` for one row: fills `size` and `first`, returns the words."""
    length = word_of.shape[0]
    for w in range(length + 1):
        size[w] = 0
        first[w] = length
    count = 0
    for p in range(length):
        if maskable[p]:
            w = word_of[p]
            size[w] += 1
            if p < first[w]:
                first[w] = p
            if w >= count:
                count = w + 1
    return count


@_compiled
def _visit_order(key: int, count: int, heap: np.ndarray) -> None:  # pragma: no cover
    """The row's words as a min-heap of `spans.albert_ngrams`' sort keys (a 24-bit score,
    then the word): `_next` pops them in its visiting order. A row stops at its budget,
    long before its last word, so popping beats sorting every word."""
    for w in range(count):
        heap[w] = ((_mix32(key ^ w) >> 8) << 20) | w
    for i in range(count // 2 - 1, -1, -1):
        _sift_down(heap, i, count)


@_compiled
def _sift_down(heap: np.ndarray, i: int, n: int) -> None:  # pragma: no cover - compiled
    x = heap[i]
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] >= x:
            break
        heap[i] = heap[child]
        i = child
    heap[i] = x


@_compiled
def _next(heap: np.ndarray, n: int) -> int:  # pragma: no cover - compiled
    """The next word to visit, from a heap of `n` keys (then `n - 1`)."""
    top = heap[0]
    heap[0] = heap[n - 1]
    _sift_down(heap, 0, n - 1)
    return top & _LOW20


@_compiled
def _whole_words_row(
    size: np.ndarray, count: int, visit: np.ndarray, budget: int, taken: np.ndarray
) -> None:  # pragma: no cover - compiled
    n = 0
    for step in range(count):
        if n >= budget:
            break
        w = _next(visit, count - step)
        if size[w] <= budget - n:
            taken[w] = True
            n += size[w]


@_compiled
def _ngram_row(
    size: np.ndarray,
    count: int,
    visit: np.ndarray,
    budget: int,
    key: int,
    cdf: np.ndarray,
    gram: np.ndarray,
    taken: np.ndarray,
    owner: np.ndarray,
) -> None:  # pragma: no cover - compiled
    longest = cdf.shape[0]
    n_taken = 0
    step = 0
    while n_taken < budget and step < count:
        start = _next(visit, count - step)
        n = _draw_length(key, step, cdf)
        room = budget - n_taken
        total = 0
        fit = 0
        for k in range(longest):
            if start + k < count:
                total += size[start + k]
            gram[k] = total
            if k < n and total <= room:
                fit += 1
        inside = min(fit, count - start)
        free = fit > 0
        for k in range(inside):
            if taken[start + k]:
                free = False
        if free:
            for k in range(inside):
                taken[start + k] = True
                owner[start + k] = start
            n_taken += gram[fit - 1]
        step += 1


@_compiled
def _span_row(
    word_of: np.ndarray,
    maskable: np.ndarray,
    size: np.ndarray,
    count: int,
    budget: int,
    anchor_key: int,
    length_key: int,
    cdf: np.ndarray,
    limit: int,
    candidates: np.ndarray,
    taken: np.ndarray,
    owner: np.ndarray,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """SpanBERT's loop for one row; returns (the word the budget cut, tokens of it taken)."""
    length = word_of.shape[0]
    # Maskable positions first, in order, then the rest: `spans.spanbert_spans`' stable sort.
    n_maskable = 0
    for p in range(length):
        if maskable[p]:
            candidates[n_maskable] = p
            n_maskable += 1
    rest = n_maskable
    for p in range(length):
        if not maskable[p]:
            candidates[rest] = p
            rest += 1
    cut_word = length
    cut_len = 0
    longest = cdf.shape[0]
    n_taken = 0
    step = 0
    while step < limit and n_taken < budget:
        u = _unit(_mix32(anchor_key ^ step))
        r = min(int(u * np.float32(n_maskable)), length - 1)
        start = word_of[candidates[r]]
        span = _draw_length(length_key, step, cdf)
        if not taken[start]:
            room = budget - n_taken
            after = 0
            for k in range(min(span, longest)):
                word = start + k
                if word >= count or taken[word] or size[word] <= 0:
                    continue
                fresh = size[word]
                after += fresh
                if after <= room:
                    taken[word] = True
                    owner[word] = start
                    n_taken += fresh
                elif after - fresh < room:
                    owner[word] = start
                    cut_word = word
                    cut_len = room - after + fresh
                    n_taken += cut_len
        step += 1
    return cut_word, cut_len


@_compiled
def _select(  # pragma: no cover - compiled
    kind: int,
    word_of: np.ndarray,  # [B, L] int64
    maskable: np.ndarray,  # [B, L] bool
    budget: np.ndarray,  # [B] int64
    order_keys: np.ndarray,  # [B] int64: visiting order, or SpanBERT's anchors
    length_keys: np.ndarray,  # [B] int64
    cdf: np.ndarray,  # [K] float32
    limit: int,
    masked: np.ndarray,  # [B, L] bool, out
    units: np.ndarray,  # [B, L] int64, out
) -> None:
    b, length = word_of.shape
    size = np.empty(length + 1, dtype=np.int64)
    first = np.empty(length + 1, dtype=np.int64)
    visit = np.empty(length, dtype=np.int64)
    gram = np.empty(cdf.shape[0], dtype=np.int64)
    taken = np.empty(length + 1, dtype=np.bool_)
    owner = np.empty(length + 1, dtype=np.int64)
    for row in range(b):
        words = word_of[row]
        can = maskable[row]
        count = _table(words, can, size, first)
        taken[:] = False
        cut_word, cut_len = length, 0
        if kind == SPANS:
            cut_word, cut_len = _span_row(
                words, can, size, count, budget[row], order_keys[row], length_keys[row],
                cdf, limit, visit, taken, owner,
            )  # fmt: skip
        elif count > 0 and budget[row] > 0:
            _visit_order(order_keys[row], count, visit)
            if kind == WHOLE_WORDS:
                _whole_words_row(size, count, visit, budget[row], taken)
                for w in range(count):
                    owner[w] = w  # a one-word gram's owner is the word itself
            else:
                _ngram_row(
                    size, count, visit, budget[row], length_keys[row], cdf, gram, taken, owner
                )
        for p in range(length):
            w = words[p]
            hit = can[p] and (taken[w] or (w == cut_word and p < first[w] + cut_len))
            masked[row, p] = hit
            units[row, p] = owner[w] if hit else w


def select(
    kind: int,
    word_of: torch.Tensor,
    maskable: torch.Tensor,
    budget: torch.Tensor,
    order_keys: torch.Tensor,
    length_keys: torch.Tensor,
    cdf: torch.Tensor,
    limit: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """([B, L] masked, [B, L] unit ids) of CPU tensors, as `spans.select_words` gives
    them by the tensor loops; `kind` is WHOLE_WORDS, NGRAMS or SPANS."""
    masked = np.empty(tuple(word_of.shape), dtype=np.bool_)
    units = np.empty(tuple(word_of.shape), dtype=np.int64)
    _select(
        kind,
        _ints(word_of),
        np.ascontiguousarray(maskable.numpy()),
        _ints(budget),
        _ints(order_keys),
        _ints(length_keys),
        np.ascontiguousarray(cdf.numpy(), dtype=np.float32),
        limit,
        masked,
        units,
    )
    return torch.from_numpy(masked), torch.from_numpy(units)


def _ints(t: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.numpy(), dtype=np.int64)
