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
   and exact for single tokens.
4. Each chosen position becomes `[MASK]` (80%), a random non-special token (10%) or stays
   (10%); decided per token, except `span`, where SpanBERT decides per span.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from schemas.masking import MaskingSettings

IGNORE_INDEX = -100

_M32 = 0xFFFFFFFF
# Streams keep the random numbers used for different decisions independent.
_STREAM_SELECT = 1
_STREAM_CROSS = 2
_STREAM_ACTION = 3
_STREAM_RANDOM_TOKEN = 4
_STREAM_GROUP_LEN = 5


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2**32 for 32-bit x held in int64, without signed overflow."""
    lo, hi = c & 0xFFFF, c >> 16
    return (x * lo + (((x * hi) & 0xFFFF) << 16)) & _M32


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """Chris Wellons' lowbias32 integer hash: good avalanche, cheap, exact on any device."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def sequence_keys(seed: int, epoch: int, indices: torch.Tensor) -> torch.Tensor:
    """A 32-bit key per sequence from (seed, epoch, global sequence index). [B] int64."""
    idx = indices.to(torch.int64)
    h = torch.full_like(idx, _mix32(torch.tensor((seed & _M32) ^ 0x5BD1E995)).item())
    h = _mix32(h ^ ((seed >> 32) & _M32))
    h = _mix32(h ^ (epoch & _M32))
    h = _mix32(h ^ (idx & _M32))
    return _mix32(h ^ ((idx >> 32) & _M32))


def _hash(keys: torch.Tensor, counters: torch.Tensor, stream: int) -> torch.Tensor:
    """32-bit hash of (key, counter, stream); keys [B], counters [B, N] -> [B, N] int64."""
    k = _mix32(keys ^ _mul32(torch.full_like(keys, stream), 0x9E3779B9))
    return _mix32(_mix32(k[:, None] ^ counters) ^ 0x632BE5AB)


def _uniform(keys: torch.Tensor, counters: torch.Tensor, stream: int) -> torch.Tensor:
    return _hash(keys, counters, stream).to(torch.float32) * (1.0 / 4294967296.0)


@dataclass(frozen=True)
class MaskTables:
    """Per-vocabulary lookups: which ids are special, which start a word, what may replace."""

    special: torch.Tensor  # [V] bool
    word_start: torch.Tensor  # [V] bool
    random_pool: torch.Tensor  # [R] int64, the non-special ids a random replacement draws from
    mask_id: int

    @classmethod
    def build(
        cls, vocab_size: int, special_ids: list[int], word_start: list[bool] | None, mask_id: int
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
        return cls(special=special, word_start=starts, random_pool=pool, mask_id=mask_id)

    def to(self, device: torch.device | str) -> MaskTables:
        return MaskTables(
            special=self.special.to(device),
            word_start=self.word_start.to(device),
            random_pool=self.random_pool.to(device),
            mask_id=self.mask_id,
        )


@dataclass
class MaskResult:
    input_ids: torch.Tensor  # [B, L] ids after replacement
    labels: torch.Tensor  # [B, L] original id where predicted, IGNORE_INDEX elsewhere
    masked: torch.Tensor  # [B, L] bool, positions to predict
    unit_ids: torch.Tensor  # [B, L] int64, the unit (token/word/group) each position is in
    action: torch.Tensor  # [B, L] int8: 0 none, 1 [MASK], 2 random token, 3 kept


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
    keys: torch.Tensor,
    tables: MaskTables,
    settings: MaskingSettings,
) -> torch.Tensor:
    """[B, L] int64: unit index of every position; units are numbered left to right per row."""
    b, length = ids.shape
    positions = torch.arange(length, device=ids.device).expand(b, length)
    if settings.kind == "token":
        return positions.clone()
    # A word starts at a word-start piece and right after a non-maskable position; special
    # tokens and padding belong to no word (they take the number of the word before them,
    # but are never maskable, so they never count toward a unit).
    after_special = torch.ones_like(maskable)
    after_special[:, 1:] = ~maskable[:, :-1]
    is_start = maskable & (tables.word_start[ids] | after_special)
    word = torch.clamp(torch.cumsum(is_start.to(torch.int64), 1) - 1, min=0)  # [B, L]
    cdf = _group_lengths_cdf(settings)
    if cdf is None:
        return word
    # Partition the words into consecutive groups of random length: group g spans words
    # [ends[g-1], ends[g]).
    counters = torch.arange(length, device=ids.device).expand(b, length)
    u = _uniform(keys, counters, _STREAM_GROUP_LEN)  # [B, L]
    lengths = torch.searchsorted(cdf.to(ids.device), u.contiguous(), right=True) + 1  # [B, L]
    lengths = torch.clamp(lengths, max=cdf.numel())
    ends = torch.cumsum(lengths, 1)  # [B, L], ends[:, g] = first word after group g
    return torch.searchsorted(ends, word.contiguous(), right=True)


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
    replacement.
    """
    ids = ids.to(torch.int64)
    b, length = ids.shape
    device = ids.device
    maskable = attention.bool() & ~tables.special[ids]  # [B, L]
    units = _unit_ids(ids, maskable, keys, tables, settings)  # [B, L]
    n_units = length  # unit ids are < L in every row

    unit_len = torch.zeros(b, n_units, dtype=torch.int64, device=device)
    unit_len.scatter_add_(1, units, maskable.to(torch.int64))  # [B, U] maskable tokens per unit

    n_maskable = maskable.sum(1)  # [B]
    budget = torch.clamp(torch.round(n_maskable.to(torch.float32) * settings.prob), min=1)
    budget = torch.where(n_maskable > 0, budget.to(torch.int64), torch.zeros_like(n_maskable))
    if settings.max_predictions is not None:
        budget = torch.clamp(budget, max=settings.max_predictions)

    unit_counter = torch.arange(n_units, device=device).expand(b, n_units)
    score = _hash(keys, unit_counter, _STREAM_SELECT)  # [B, U]
    score = torch.where(unit_len > 0, score, torch.full_like(score, 1 << 40))
    order = torch.sort(score, dim=1, stable=True).indices  # [B, U] units in visiting order
    sorted_len = torch.gather(unit_len, 1, order)  # [B, U]
    after = torch.cumsum(sorted_len, 1)  # tokens taken once this unit is in
    before = after - sorted_len
    remaining = (budget[:, None] - before).to(torch.float32)
    u_cross = _uniform(keys, unit_counter, _STREAM_CROSS)  # [B, U]
    crossing = (before < budget[:, None]) & (u_cross * sorted_len.to(torch.float32) < remaining)
    take = (sorted_len > 0) & ((after <= budget[:, None]) | crossing)
    if settings.max_predictions is not None:
        take &= after <= settings.max_predictions
    unit_taken = torch.zeros_like(take).scatter_(1, order, take)  # [B, U]
    masked = torch.gather(unit_taken, 1, units) & maskable  # [B, L]

    # 80/10/10, per token or (span) per unit.
    pos_counter = torch.arange(length, device=device).expand(b, length)
    action_counter = units if settings.kind == "span" else pos_counter
    r = _uniform(keys, action_counter, _STREAM_ACTION)  # [B, L]
    to_mask = masked & (r < settings.mask_ratio)
    to_random = masked & ~to_mask & (r < settings.mask_ratio + settings.random_ratio)
    pick = _hash(keys, pos_counter, _STREAM_RANDOM_TOKEN) % tables.random_pool.numel()
    random_ids = tables.random_pool[pick]  # [B, L]

    out = torch.where(to_mask, torch.full_like(ids, tables.mask_id), ids)
    out = torch.where(to_random, random_ids, out)
    labels = torch.where(masked, ids, torch.full_like(ids, IGNORE_INDEX))
    action = torch.zeros(b, length, dtype=torch.int8, device=device)
    action[masked] = 3
    action[to_mask] = 1
    action[to_random] = 2
    return MaskResult(input_ids=out, labels=labels, masked=masked, unit_ids=units, action=action)


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
