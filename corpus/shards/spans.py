"""SpanBERT's span and ALBERT's n-gram selection, as their reference code samples them.

Both references are sequential loops over random draws, and what they produce (how long
the contiguous masked runs are, how often spans touch) comes from that loop: from
rejecting an anchor that is already masked, from a span running over words another span
took, from trying shorter n-grams when a long one would cross the budget. So the loops
are kept, step for step, and run in lock-step over the rows of a batch: step t makes
every row's t-th draw, with tensors of [B] and [B, K] (K = the longest span or n-gram),
so a step costs the same for 8 rows or 8,000. Draw t of a row is `pair_bits(key, t)`, a
function of the sequence's key alone, so a row's masks do not depend on its batch. On the
CPU, with numba, `select_words` runs the same loops compiled, row by row (spans_compiled).

State is per word (`taken`): every span covers whole words except the one the budget
cuts, and that cut ends the row's loop, so a word is either all masked or not touched.

- SpanBERT (facebookresearch/SpanBERT, `PairWithSpanMaskingScheme.mask`): until the
  budget is met, draw a length from Geometric(p) clipped to `span_max_words` words and an
  anchor uniform over the maskable tokens; an anchor already masked is rejected; else
  mask from the anchor's word start over that many words (stopping at the sequence's
  end), position by position until the budget is met (the last span may end inside a
  word).
- ALBERT (google-research/albert, `create_masked_lm_predictions`): visit the words in a
  random order; at each, draw n with p(n) ∝ 1/n; while the n-gram starting there would
  cross the budget try n - 1; skip it if none fits or if it touches a masked word; stop
  when the budget is met.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from clozeworks.corpus.shards import spans_compiled
from clozeworks.corpus.shards.counter_rng import pair_bits, row_bits, to_unit_interval


@dataclass(frozen=True)
class WordTable:
    """Words of each row: word w of row b has `size[b, w]` tokens from `first[b, w]` on.

    Column L of `size` and `first` is a sink that out-of-range steps read and write.
    """

    index: torch.Tensor  # [B, L] the word of every position (meaningful where maskable)
    first: torch.Tensor  # [B, L + 1] position of each word's first token
    size: torch.Tensor  # [B, L + 1] tokens per word, 0 past the row's last word
    count: torch.Tensor  # [B] words per row

    @classmethod
    def build(cls, index: torch.Tensor, maskable: torch.Tensor) -> WordTable:
        b, length = index.shape
        size = torch.zeros(b, length + 1, dtype=torch.int64, device=index.device)
        size.scatter_add_(1, index, maskable.to(torch.int64))
        positions = torch.arange(length, device=index.device).expand(b, length)
        first = torch.full((b, length + 1), length, dtype=torch.int64, device=index.device)
        first.scatter_reduce_(1, index, positions.where(maskable, length), "amin")
        count = torch.where(maskable.any(1), index.masked_fill(~maskable, -1).amax(1) + 1, 0)
        return cls(index=index, first=first, size=size, count=count)


def draw_lengths(keys: torch.Tensor, step: int, cdf: torch.Tensor) -> torch.Tensor:
    """[B] lengths in 1..len(cdf) by inverse CDF, draw `step` of each row."""
    u = to_unit_interval(pair_bits(keys, step))  # [B]
    return (u[:, None] >= cdf[:-1]).sum(1) + 1


def _per_position(
    table: WordTable, maskable: torch.Tensor, taken: torch.Tensor, owner: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """([B, L] masked positions, [B, L] the first word of the span each is in, else its
    own word) from per-word state."""
    masked = taken.gather(1, table.index) & maskable
    return masked, torch.where(masked, owner.gather(1, table.index), table.index)


def select_words(
    spans: bool,
    word_of: torch.Tensor,
    maskable: torch.Tensor,
    budget: torch.Tensor,
    order_keys: torch.Tensor,
    length_keys: torch.Tensor,
    cdf: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """([B, L] masked, [B, L] unit ids): SpanBERT's spans (`spans`), else ALBERT's n-grams
    with lengths by `cdf` (one word: BERT's whole words), over the words `word_of` numbers.
    On the CPU with numba installed the loops run compiled, row by row, with the same masks
    (`spans_compiled`); elsewhere the lock-step tensor loops below."""
    if word_of.device.type == "cpu" and spans_compiled.AVAILABLE:
        if spans:
            kind = spans_compiled.SPANS
        else:
            kind = spans_compiled.WHOLE_WORDS if cdf.numel() == 1 else spans_compiled.NGRAMS
        limit = span_draw_limit(word_of.shape[1])
        keys = (order_keys, length_keys)
        return spans_compiled.select(kind, word_of, maskable, budget, *keys, cdf, limit)
    table = WordTable.build(word_of, maskable)
    pick = spanbert_spans if spans else albert_ngrams
    return pick(table, maskable, budget, order_keys, length_keys, cdf)


def span_draw_limit(length: int) -> int:
    """The most draws SpanBERT's loop makes for a row of `length`: each masks a span or
    rejects an anchor already masked (at most the masked share of draws), so this is far
    more than any row needs and never binds in practice."""
    return 64 + 8 * length


def spanbert_spans(
    table: WordTable,
    maskable: torch.Tensor,
    budget: torch.Tensor,
    anchor_keys: torch.Tensor,
    length_keys: torch.Tensor,
    cdf: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """([B, L] masked, [B, L] unit ids): SpanBERT's spans until each row's budget is met."""
    b, length = maskable.shape
    dev = maskable.device
    rows = torch.arange(b, device=dev)
    steps = torch.arange(cdf.numel(), device=dev)  # [K]
    # Maskable positions first, in order: anchor r of a row is candidates[row, r].
    candidates = torch.sort((~maskable).to(torch.int8), dim=1, stable=True).indices  # [B, L]
    n_maskable = maskable.sum(1)  # [B]
    taken = torch.zeros(b, length + 1, dtype=torch.bool, device=dev)  # [B, W + 1]
    owner = torch.zeros(b, length + 1, dtype=torch.int64, device=dev)
    cut_word = torch.full((b,), length, dtype=torch.int64, device=dev)
    cut_len = torch.zeros(b, dtype=torch.int64, device=dev)
    count = torch.zeros(b, dtype=torch.int64, device=dev)
    active = count < budget
    limit = span_draw_limit(length)
    step = 0
    while step < limit and bool(active.any()):
        u = to_unit_interval(pair_bits(anchor_keys, step))  # [B]
        r = (u * n_maskable).to(torch.int64).clamp(max=length - 1)
        start = table.index[rows, candidates[rows, r]]  # [B] the anchor's word
        span = draw_lengths(length_keys, step, cdf)  # [B] words
        go = active & ~taken[rows, start]
        idx = start[:, None] + steps  # [B, K]
        inside = go[:, None] & (steps < span[:, None]) & (idx < table.count[:, None])
        idx = torch.where(inside, idx, length)
        fresh = table.size.gather(1, idx) * ~taken.gather(1, idx)  # [B, K] tokens to add
        room = (budget - count)[:, None]  # [B, 1]
        after = fresh.cumsum(1)
        whole = (fresh > 0) & (after <= room)
        part = (fresh > 0) & (after > room) & (after - fresh < room)  # at most one per row
        hit = torch.where(whole | part, idx, length)
        taken.scatter_(1, torch.where(whole, idx, length), True)
        owner.scatter_(1, hit, start[:, None].expand_as(hit))
        taken[:, length] = False
        has_part = part.any(1)
        cut_word = torch.where(has_part, (idx * part).sum(1), cut_word)
        cut_len = torch.where(has_part, ((room - after + fresh) * part).sum(1), cut_len)
        count = count + (fresh * whole).sum(1) + ((room - after + fresh) * part).sum(1)
        active = count < budget
        step += 1
    masked, units = _per_position(table, maskable, taken, owner)
    # The span the budget cut ends inside its last word: that word's first `cut_len` tokens.
    positions = torch.arange(length, device=dev)
    in_cut = (table.index == cut_word[:, None]) & maskable
    head = positions < (table.first.gather(1, cut_word[:, None]) + cut_len[:, None])
    cut = in_cut & head
    units = torch.where(cut, owner.gather(1, table.index), units)
    return masked | cut, units


def albert_ngrams(
    table: WordTable,
    maskable: torch.Tensor,
    budget: torch.Tensor,
    order_keys: torch.Tensor,
    length_keys: torch.Tensor,
    cdf: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """([B, L] masked, [B, L] unit ids): ALBERT's n-grams until each row's budget is met."""
    b, length = maskable.shape
    dev = maskable.device
    steps = torch.arange(cdf.numel(), device=dev)  # [K]
    words = torch.arange(length, device=dev)
    # The words in random order (unique keys: a 24-bit score, then the word index).
    score = (row_bits(order_keys, length) >> 8).masked_fill(words >= table.count[:, None], 1 << 24)
    visit = torch.sort((score << 20) | words, dim=1).values & 0xFFFFF  # [B, W]
    if cdf.numel() == 1:
        return _whole_words(table, maskable, budget, visit)
    taken = torch.zeros(b, length + 1, dtype=torch.bool, device=dev)
    owner = torch.zeros(b, length + 1, dtype=torch.int64, device=dev)
    count = torch.zeros(b, dtype=torch.int64, device=dev)
    active = (count < budget) & (table.count > 0)
    step = 0
    while bool(active.any()):
        start = visit[:, step]  # [B]
        n = draw_lengths(length_keys, step, cdf)  # [B] words
        idx = start[:, None] + steps  # [B, K]
        inside = idx < table.count[:, None]
        idx = torch.where(inside, idx, length)
        gram = table.size.gather(1, idx).cumsum(1)  # [B, K] tokens of the (k+1)-gram
        room = (budget - count)[:, None]
        # The longest n' <= n that fits (gram only grows with n', so that is a prefix).
        n_fit = ((steps < n[:, None]) & (gram <= room)).sum(1)  # [B]
        use = inside & (steps < n_fit[:, None])
        take = active & (n_fit > 0) & ~(taken.gather(1, idx) & use).any(1)
        use &= take[:, None]
        hit = torch.where(use, idx, length)
        taken.scatter_(1, hit, True)
        owner.scatter_(1, hit, start[:, None].expand_as(hit))
        taken[:, length] = False
        added = gram.gather(1, (n_fit - 1).clamp(min=0)[:, None])[:, 0]
        count = count + torch.where(take, added, 0)
        step += 1
        active = (count < budget) & (step < table.count)
    return _per_position(table, maskable, taken, owner)


def _whole_words(
    table: WordTable, maskable: torch.Tensor, budget: torch.Tensor, visit: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """`albert_ngrams` with n-grams of one word (BERT's whole-word masking), the same masks
    in fewer steps. With one-word grams the loop takes each visited word whose tokens fit
    the room left and skips the others; no word is visited twice, so none is ever refused
    for touching a masked one. Every word before the first that does not fit is taken: that
    prefix is one cumulative sum. Only the rows it leaves short of their budget go on, one
    word per step, through the words after it."""
    b, length = maskable.shape
    dev = maskable.device
    rows = torch.arange(b, device=dev)
    sizes = table.size.gather(1, visit)  # [B, W] tokens of each visited word
    total = sizes.cumsum(1)
    position = torch.arange(length, device=dev)
    words = table.count[:, None]
    started = (budget > 0) & (table.count > 0)
    # The prefix: visits before the first whose running total passes the budget.
    over = (total > budget[:, None]) | (position >= words)
    first_over = torch.where(over.any(1), over.to(torch.int8).argmax(1), length)
    first_over = torch.where(started, first_over, 0)
    prefix = position < first_over[:, None]  # [B, W]
    taken = torch.zeros(b, length + 1, dtype=torch.bool, device=dev)
    taken.scatter_(1, torch.where(prefix, visit, length), True)
    count = (sizes * prefix).sum(1)
    step = first_over.clone()
    active = started & (count < budget) & (step < table.count)
    while bool(active.any()):
        at = step.clamp(max=length - 1)
        word = visit[rows, at]
        size = sizes[rows, at]
        take = active & (size <= budget - count)
        taken[rows, torch.where(take, word, length)] = True
        count = count + torch.where(take, size, 0)
        step = step + active.to(step.dtype)
        active = active & (count < budget) & (step < table.count)
    taken[:, length] = False
    # A one-word gram's owner is the word itself: units are the words.
    return _per_position(table, maskable, taken, torch.arange(length + 1, device=dev).expand(b, -1))
