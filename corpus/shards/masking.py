"""Masked-language-model masking: the one definition the static writer and the trainer share.

Everything is a batched tensor operation, so the same function masks a block in a Beam
worker (CPU tensors) or a batch on the training GPU. Randomness comes from a counter-based
hash of (seed, epoch, sequence index, position) rather than from a generator's state, so
a sequence's mask does not depend on which batch, worker or device it lands on and a
resumed run sees exactly the masks the uninterrupted run would.

How positions are chosen (all kinds):

1. Every position belongs to a *unit*: a token (`token`), a word (`wwm`), or a group of
   consecutive words whose length is drawn per group (`ngram`: n in 1..3 with p ∝ 1/n as in
   ALBERT; `span`: Geometric(0.2) clipped at 10 words as in SpanBERT).
2. The budget is `max(1, round(prob * maskable))`, capped by `max_predictions`.
3. Units are visited in a random order and taken while the running token count stays within
   the budget. The unit that would cross the budget is taken with probability
   (remaining budget / its length), so the masked share is unbiased for multi-token units
   and exact for single tokens. If `max_predictions` leaves no room for that unit, the rest
   of the budget goes to later units that fit (first fit, as BERT's
   create_pretraining_data.py does), so a cap equal to the budget does not lower the share.
4. Each chosen position becomes `[MASK]` (80%), a random non-special token (10%: uniform
   over the vocabulary as BERT draws it, or by corpus frequency as SpanBERT does, the
   default for `span` when the tokenizer ships `token_counts.json`) or stays (10%);
   decided per token, except `span`, where SpanBERT decides once per maximal run of
   masked positions (touching spans are merged first, as its `merge_intervals` does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

from clozeworks.schemas.masking import MaskingSettings

IGNORE_INDEX = -100

_M32 = 0xFFFFFFFF
# Streams keep the random numbers used for different decisions independent.
_STREAM_SELECT = 1
_STREAM_CROSS = 2
_STREAM_ACTION = 3
_STREAM_RANDOM_TOKEN = 4
_STREAM_GROUP_LEN = 5
_STREAMS = (_STREAM_SELECT, _STREAM_CROSS, _STREAM_ACTION, _STREAM_RANDOM_TOKEN, _STREAM_GROUP_LEN)
_GOLDEN = 0x9E3779B9
# First-fit passes after a hard cap blocks the crossing unit; more change nothing measurable.
_FILL_PASSES = 3


_Ints = TypeVar("_Ints", torch.Tensor, np.ndarray)  # int64 either way


def _mul32(x: _Ints, c: int) -> _Ints:
    """(x * c) mod 2**32 for 32-bit x held in int64, without signed overflow: c - 2**32 is
    the same multiplier mod 2**32 and fits 31 bits, so |x * c| < 2**63."""
    return (x * (c - (1 << 32) if c >= 1 << 31 else c)) & _M32


def _mix32(x: _Ints) -> _Ints:
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
    start = int(_mix32(np.array([(seed & _M32) ^ 0x5BD1E995], dtype=np.int64))[0])
    h = _mix32(np.full_like(idx, start) ^ ((seed >> 32) & _M32))
    h = _mix32(h ^ (epoch & _M32))
    h = _mix32(h ^ (idx & _M32))
    return _mix32(h ^ ((idx >> 32) & _M32))


def _stream_keys(keys: torch.Tensor, streams: tuple[int, ...]) -> torch.Tensor:
    """[B, S]: one 32-bit key per (sequence, stream), itself a uniform random number."""
    cache_key = (streams, keys.device)
    salts = _SALTS.get(cache_key)
    if salts is None:
        salts = torch.tensor([(s * _GOLDEN) & _M32 for s in streams], device=keys.device)
        _SALTS[cache_key] = salts
    return _mix32(keys[:, None] ^ salts)


_SALTS: dict[tuple[tuple[int, ...], torch.device], torch.Tensor] = {}


def _row_bits(stream_keys: torch.Tensor, length: int) -> torch.Tensor:
    """[B, length] 32 random bits per (stream key, position); stream_keys [B]."""
    positions = torch.arange(length, device=stream_keys.device)
    return _mix32(stream_keys[:, None] ^ positions)


def _pair_bits(stream_keys: torch.Tensor, counters: torch.Tensor) -> torch.Tensor:
    """[M] bits for M (stream key, counter) pairs: the same value `_row_bits` gives them."""
    return _mix32(stream_keys ^ counters)


def random_bits(keys: torch.Tensor, length: int, stream: int) -> torch.Tensor:
    """[B, length] int64 of 32 random bits per (sequence key, position, stream).

    Position i's value does not depend on `length`, so padding never changes it. Streams
    1..99 are used here; other modules (the trainer's word-structure shuffle) use 100 and up.
    """
    return _row_bits(_stream_keys(keys, (stream,))[:, 0], length)


def to_unit_interval(bits: torch.Tensor) -> torch.Tensor:
    """32-bit ints -> float32 in [0, 1). Uses the top 24 bits, so every value is exact."""
    return (bits >> 8).to(torch.float32) * (1.0 / 16777216.0)


@dataclass(frozen=True)
class MaskTables:
    """Per-vocabulary lookups: which ids are special, which start a word, what may replace."""

    special: torch.Tensor  # [V] bool
    word_start: torch.Tensor  # [V] bool
    random_pool: torch.Tensor  # [R] int64, the non-special ids a random replacement draws from
    mask_id: int
    # [V] float32 cumulative share of each id in the corpus (specials 0), or None: what a
    # replacement drawn by frequency inverts (SpanBERT).
    frequency_cdf: torch.Tensor | None = None

    @classmethod
    def build(
        cls,
        vocab_size: int,
        special_ids: list[int],
        word_start: list[bool] | None,
        mask_id: int,
        counts: list[int] | None = None,
    ) -> MaskTables:
        special = torch.zeros(vocab_size, dtype=torch.bool)
        special[torch.tensor(sorted(set(special_ids)), dtype=torch.int64)] = True
        starts = (
            torch.ones(vocab_size, dtype=torch.bool)
            if word_start is None
            else torch.tensor(word_start, dtype=torch.bool)
        )
        if starts.numel() != vocab_size:
            raise ValueError(f"word_start has {starts.numel()} entries for {vocab_size} ids")
        pool = torch.nonzero(~special).flatten()
        if pool.numel() == 0:
            raise ValueError("every id is special: nothing to draw random replacements from")
        cdf = None
        if counts is not None:
            weights = torch.tensor(counts, dtype=torch.float64)
            if weights.numel() != vocab_size or bool((weights < 0).any()):
                raise ValueError(f"token counts need {vocab_size} non-negative entries")
            weights[special] = 0
            if float(weights.sum()) > 0:
                cdf = (torch.cumsum(weights, 0) / weights.sum()).to(torch.float32)
        return cls(special, starts, pool, mask_id, cdf)

    def to(self, device: torch.device | str) -> MaskTables:
        return MaskTables(
            special=self.special.to(device),
            word_start=self.word_start.to(device),
            random_pool=self.random_pool.to(device),
            mask_id=self.mask_id,
            frequency_cdf=None if self.frequency_cdf is None else self.frequency_cdf.to(device),
        )


@dataclass
class MaskResult:
    input_ids: torch.Tensor  # [B, L] ids after replacement
    labels: torch.Tensor  # [B, L] original id where predicted, IGNORE_INDEX elsewhere
    masked: torch.Tensor  # [B, L] bool, positions to predict
    unit_ids: torch.Tensor  # [B, L] int64, the unit (token/word/group) each position is in
    action: torch.Tensor  # [B, L] int8: 0 none, 1 [MASK], 2 random token, 3 kept


def _lookup(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """table[ids] for a 1-D table; index_select is several times faster than fancy indexing."""
    return table.index_select(0, ids.reshape(-1)).view(ids.shape)


def _group_lengths_cdf(settings: MaskingSettings) -> torch.Tensor | None:
    """Cumulative distribution of a group's length in words, or None for word/token units."""
    if settings.kind == "ngram":
        weights = torch.tensor([1.0 / n for n in range(1, settings.ngram_max + 1)])
    elif settings.kind == "span":
        p = settings.span_p
        n = torch.arange(1, settings.span_max_words + 1, dtype=torch.float64)
        weights = p * (1 - p) ** (n - 1)
    else:
        return None
    return torch.cumsum(weights / weights.sum(), 0).to(torch.float32)


def _unit_ids(
    ids: torch.Tensor,
    maskable: torch.Tensor,
    group_keys: torch.Tensor,
    tables: MaskTables,
    settings: MaskingSettings,
) -> tuple[torch.Tensor, torch.Tensor]:
    """([B, L] unit index, [B, L] word index) of every position, numbered left to right."""
    b, length = ids.shape
    positions = torch.arange(length, device=ids.device).expand(b, length)
    if settings.kind == "token":
        return positions, positions
    # A word starts at a word-start piece and right after a non-maskable position; special
    # tokens and padding belong to no word (they take the number of the word before them,
    # but are never maskable, so they never count toward a unit).
    after_special = torch.ones_like(maskable)
    after_special[:, 1:] = ~maskable[:, :-1]
    is_start = maskable & (_lookup(tables.word_start, ids) | after_special)
    word = torch.clamp(torch.cumsum(is_start.to(torch.int64), 1) - 1, min=0)  # [B, L]
    cdf = _group_lengths_cdf(settings)
    if cdf is None:
        return word, word
    # Partition the words into consecutive groups of random length: group g spans words
    # [ends[g-1], ends[g]).
    # (Counting comparisons instead of searchsorted is the same inverse CDF, and faster.)
    u = to_unit_interval(_row_bits(group_keys, length))  # [B, L]
    below = (u[:, :, None] >= cdf.to(ids.device)[:-1]).sum(2)  # [B, L] cdf steps below u
    ends = torch.cumsum(below + 1, 1)  # [B, L], ends[:, g] = first word after group g
    # Group of word w = number of group ends <= w: mark every end and count along the row.
    marks = torch.zeros(b, length + 1, dtype=torch.int64, device=ids.device)
    marks.scatter_add_(1, ends.clamp(max=length), torch.ones_like(ends))
    return torch.gather(torch.cumsum(marks, 1), 1, word), word


def _fill_under_cap(
    take: torch.Tensor,
    candidate: torch.Tensor,
    sorted_len: torch.Tensor,
    remaining: torch.Tensor,
) -> torch.Tensor:
    """Add units from `candidate` (visiting order) that fit in `remaining` tokens, first fit.

    A few passes of "take the fitting units while their running sum fits" come within a
    token or two of true first fit, which is what BERT's create_pretraining_data.py does.
    """
    for _ in range(_FILL_PASSES):
        fits = candidate & (sorted_len <= remaining[:, None])  # [B, U]
        add = fits & (torch.cumsum(sorted_len * fits, 1) <= remaining[:, None])
        take = take | add
        remaining = remaining - (sorted_len * add).sum(1)
        candidate = candidate & ~add
    return take


def _cut_crossing(
    crossing: torch.Tensor,
    order: torch.Tensor,
    units: torch.Tensor,
    words: torch.Tensor,
    maskable: torch.Tensor,
    rows: torch.Tensor,
    remaining: torch.Tensor,
) -> torch.Tensor:
    """[B, L] bool: the leading whole words of each row's crossing span that fit in
    `remaining` tokens (SpanBERT cuts its last span to the budget too)."""
    cross_unit = torch.gather(order, 1, crossing.to(torch.int64).argmax(1, keepdim=True))  # [B, 1]
    inside = (units == cross_unit) & maskable & rows[:, None]  # [B, L]
    count = torch.cumsum(inside.to(torch.int64), 1)  # [B, L]
    word_end = torch.zeros_like(count).scatter_reduce_(1, words, count, "amax")  # [B, W]
    return inside & (torch.gather(word_end, 1, words) <= remaining[:, None])


def _smallest(packed: torch.Tensor, budget: torch.Tensor) -> torch.Tensor:
    """[B, L] bool: the budget[b] smallest keys of each row of `packed` (keys unique)."""
    most = int(budget.max())
    if most == 0:
        return torch.zeros_like(packed, dtype=torch.bool)
    smallest = torch.topk(packed, most, dim=1, largest=False).values  # [B, most] ascending
    limit = torch.gather(smallest, 1, torch.clamp(budget - 1, min=0)[:, None])  # [B, 1]
    return (packed <= limit) & (budget[:, None] > 0)


def _choose_units(
    packed: torch.Tensor,
    unit_len: torch.Tensor,
    units: torch.Tensor,
    words: torch.Tensor,
    maskable: torch.Tensor,
    budget: torch.Tensor,
    stream: torch.Tensor,
    settings: MaskingSettings,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """([B, L] positions of the units taken, [B, L] positions of a cut span or None)."""
    order = torch.sort(packed, dim=1).values & 0xFFFFF  # [B, U] units in visiting order
    sorted_len = torch.gather(unit_len, 1, order)  # [B, U]
    after = torch.cumsum(sorted_len, 1)  # tokens taken once this unit is in
    before = after - sorted_len
    live = sorted_len > 0
    want = budget[:, None]
    take = live & (after <= want)
    # The one unit per row that would cross the budget: taken with probability
    # (budget left / its length), so the expected count is the budget.
    crossing = live & (before < want) & (after > want)  # [B, U]
    u_cross = to_unit_interval(stream[:, 1:2])  # [B, 1]
    lucky = crossing & (u_cross * sorted_len.to(torch.float32) < (want - before).float())
    cap = settings.max_predictions
    cut = None
    if cap is None:
        take = take | lucky
    else:
        # Under a hard cap the crossing unit may not fit at all; then what is left of the
        # budget goes to later units that do fit, so the masked share stays at the budget.
        within_cap = after <= cap
        take = take | (lucky & within_cap)
        blocked = (crossing & ~within_cap).any(1)  # [B]
        if bool(blocked.any()):
            remaining = torch.where(blocked, budget - (sorted_len * take).sum(1), 0)
            if settings.kind == "span":
                cut = _cut_crossing(crossing, order, units, words, maskable, blocked, remaining)
                remaining = remaining - cut.sum(1)
            candidate = live & (before >= want) & ~crossing & blocked[:, None]
            take = _fill_under_cap(take, candidate, sorted_len, remaining)
    unit_taken = torch.zeros_like(take).scatter_(1, order, take)  # [B, U]
    return torch.gather(unit_taken, 1, units) & maskable, cut


def mask_tokens(
    ids: torch.Tensor,
    attention: torch.Tensor,
    keys: torch.Tensor,
    tables: MaskTables,
    settings: MaskingSettings,
) -> MaskResult:
    """Mask a padded batch.

    ids: [B, L] token ids; attention: [B, L] bool, True on real tokens; keys: [B] from
    `sequence_keys`. Tables must be on the same device as `ids`. Returns a `MaskResult`;
    never chooses a special or padding position, never draws a special token as a random
    replacement, never predicts more than `settings.max_predictions` positions.
    """
    ids = ids.to(torch.int64)
    b, length = ids.shape
    stream = _stream_keys(keys, _STREAMS)  # [B, 5]
    maskable = attention.bool() & ~_lookup(tables.special, ids)  # [B, L]
    units, words = _unit_ids(ids, maskable, stream[:, 4], tables, settings)  # [B, L], < L
    tokens = settings.kind == "token"  # units are positions: no scatter or gather needed

    if tokens:
        unit_len = maskable.to(torch.int64)  # [B, U]
    else:
        unit_len = torch.zeros(b, length, dtype=torch.int64, device=ids.device)
        unit_len.scatter_add_(1, units, maskable.to(torch.int64))  # [B, U] tokens per unit

    n_maskable = maskable.sum(1)  # [B]
    budget = torch.clamp(torch.round(n_maskable.to(torch.float32) * settings.prob), min=1)
    budget = torch.where(n_maskable > 0, budget.to(torch.int64), 0)
    if settings.max_predictions is not None:
        budget = torch.clamp(budget, max=settings.max_predictions)

    # Visit units in random order: by a 24-bit score, ties by unit index, empty units last.
    # Packing (score, unit) into one int64 makes every key of a row unique, so an unstable
    # sort (much faster than a stable one) gives that order.
    score = _row_bits(stream[:, 0], length) >> 8  # [B, U]
    score = score.masked_fill(unit_len == 0, 1 << 24)
    packed = (score << 20) | torch.arange(length, device=ids.device)  # [B, U]
    if tokens:
        # Every unit is one token: the first `budget` units in visiting order are the
        # `budget` smallest keys, and no unit crosses the budget. topk beats a full sort.
        masked = _smallest(packed, budget) & maskable  # [B, L]
    else:
        masked, cut = _choose_units(
            packed, unit_len, units, words, maskable, budget, stream, settings
        )
        masked = masked if cut is None else masked | cut

    # 80/10/10, per token or (span) per run, drawn only where a position is predicted.
    rows, cols = masked.nonzero(as_tuple=True)  # [M]
    counter = run_starts(masked)[rows, cols] if settings.kind == "span" else cols
    r = to_unit_interval(_pair_bits(stream[rows, 2], counter))  # [M]
    to_mask = r < settings.mask_ratio
    to_random = ~to_mask & (r < settings.mask_ratio + settings.random_ratio)
    bits = _pair_bits(stream[rows, 3], cols)  # [M]
    if settings.draws_by_frequency and tables.frequency_cdf is not None:
        # By corpus frequency: invert the cumulative shares (specials have none).
        cdf = tables.frequency_cdf
        drawn = torch.searchsorted(cdf, to_unit_interval(bits), right=True)
        drawn = drawn.clamp(max=cdf.numel() - 1)
    else:
        # A uniform index into the pool by multiply-shift (no modulo bias, no division).
        drawn = tables.random_pool[(bits * tables.random_pool.numel()) >> 32]
    original = ids[rows, cols]
    replaced = torch.where(to_random, drawn, original)
    out = ids.clone()
    out[rows, cols] = torch.where(to_mask, tables.mask_id, replaced)
    labels = torch.where(masked, ids, IGNORE_INDEX)
    action = torch.zeros(b, length, dtype=torch.int8, device=ids.device)  # 0 none
    # 1 [MASK], 2 random, 3 kept
    action[rows, cols] = 3 - to_mask.to(torch.int8) * 2 - to_random.to(torch.int8)
    return MaskResult(input_ids=out, labels=labels, masked=masked, unit_ids=units, action=action)


def run_starts(masked: torch.Tensor) -> torch.Tensor:
    """[B, L]: where the maximal run of masked positions each position is in starts (-1
    before the first run). SpanBERT merges touching spans into one (`merge_intervals` in
    its masking.py) and decides [MASK] / random / kept once per merged span."""
    length = masked.shape[1]
    positions = torch.arange(length, device=masked.device).expand_as(masked)
    begins = masked.clone()
    begins[:, 1:] &= ~masked[:, :-1]
    return torch.where(begins, positions, -1).cummax(1).values


def pad_batch(
    sequences: list[torch.Tensor], pad_id: int, multiple_of: int = 8
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad 1-D id tensors to the longest, rounded up to `multiple_of`.

    Returns (ids [B, L] int64, attention [B, L] bool).
    """
    longest = max((int(s.numel()) for s in sequences), default=0)
    length = max(multiple_of, -(-longest // multiple_of) * multiple_of)
    ids = torch.full((len(sequences), length), pad_id, dtype=torch.int64)
    attention = torch.zeros((len(sequences), length), dtype=torch.bool)
    for i, seq in enumerate(sequences):
        ids[i, : seq.numel()] = seq.to(torch.int64)
        attention[i, : seq.numel()] = True
    return ids, attention
