"""Masked-language-model masking: the one definition the static writer and the trainer share.

Everything is a batched tensor operation, so the same function masks a block in a Beam
worker (CPU tensors) or a batch on the training GPU. Randomness comes from
`counter_rng`: a hash of (seed, epoch, sequence index, counter), so a sequence's mask does
not depend on which batch, worker or device it lands on and a resumed run sees exactly the
masks the uninterrupted run would.

How positions are chosen:

1. The budget is `max(1, round(prob * maskable))` (or what the kind's reference code
   computes, `budget = "reference"`), capped by `max_predictions`. `budget = "electra"`
   is ELECTRA's: that many uniform draws with replacement, so repeats mask fewer.
2. `token`: the first `budget` maskable tokens of a random order, as BERT's shuffled
   candidates.
3. `wwm`, `span`, `ngram`: BERT's, SpanBERT's and ALBERT's own sampling loops
   (`spans.py`; BERT's whole-word loop is ALBERT's with one-word n-grams): words skipped
   when they would cross the budget, anchors rejected when already masked, and so on, so
   the masked runs have the reference's length distribution and a row's count is its
   budget whenever some word fits it.
4. Each chosen position becomes `[MASK]` (80%), a random non-special token (10%: uniform
   over the vocabulary as BERT draws it, or by corpus frequency as SpanBERT does, the
   default for `span` when the tokenizer ships `token_counts.json`) or stays (10%);
   decided per token, except `span`, where SpanBERT decides once per maximal run of
   masked positions (touching spans are merged first, as its `merge_intervals` does).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from clozeworks.corpus.shards.counter_rng import (
    pair_bits,
    row_bits,
    stream_keys,
    to_unit_interval,
)
from clozeworks.corpus.shards.spans import select_words
from clozeworks.corpus.shards.words import SegmentedWords
from clozeworks.schemas.masking import MaskingSettings

IGNORE_INDEX = -100

# Streams keep the random numbers used for different decisions independent.
_STREAM_SELECT = 1
_STREAM_DRAWS = 2  # budget "electra": positions drawn with replacement
_STREAM_ACTION = 3
_STREAM_RANDOM_TOKEN = 4
_STREAM_GROUP_LEN = 5
_STREAMS = (_STREAM_SELECT, _STREAM_DRAWS, _STREAM_ACTION, _STREAM_RANDOM_TOKEN, _STREAM_GROUP_LEN)
# A length distribution that is always 1: whole words one at a time (BERT's wwm).
_ONE = torch.ones(1)


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
    # Text without spaces (Chinese, Japanese): words by the language's segmenter, which
    # replace `word_start` (corpus/shards/words.py). None: the vocabulary's word starts.
    words: SegmentedWords | None = None

    @classmethod
    def build(
        cls,
        vocab_size: int,
        special_ids: list[int],
        word_start: list[bool] | None,
        mask_id: int,
        counts: list[int] | None = None,
        words: SegmentedWords | None = None,
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
        return cls(special, starts, pool, mask_id, cdf, words)

    def to(self, device: torch.device | str) -> MaskTables:
        return MaskTables(
            special=self.special.to(device),
            word_start=self.word_start.to(device),
            random_pool=self.random_pool.to(device),
            mask_id=self.mask_id,
            frequency_cdf=None if self.frequency_cdf is None else self.frequency_cdf.to(device),
            words=self.words,
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


def _lengths_cdf(settings: MaskingSettings) -> torch.Tensor:
    """Cumulative distribution of a span's (n-gram's) length in words: Geometric(p) clipped
    at `span_max_words` as SpanBERT normalises it, or p(n) ∝ 1/n up to `ngram_max` as ALBERT."""
    if settings.kind == "ngram":
        weights = torch.tensor([1.0 / n for n in range(1, settings.ngram_max + 1)])
    else:
        p = settings.span_p
        n = torch.arange(1, settings.span_max_words + 1, dtype=torch.float64)
        weights = p * (1 - p) ** (n - 1)
    return torch.cumsum(weights / weights.sum(), 0).to(torch.float32)


def _words(
    ids: torch.Tensor,
    maskable: torch.Tensor,
    tables: MaskTables,
    word_starts: torch.Tensor | None = None,
) -> torch.Tensor:
    """[B, L] the word of every position, numbered from 0 in each row.

    A word starts at a word-start piece (by the vocabulary's table, or `word_starts` [B, L]
    where a segmenter found the words: corpus/shards/words.py) and right after a
    non-maskable position; special tokens and padding belong to no word (they take the
    number of the word before them, but are never maskable, so they never count toward one).
    """
    after_special = torch.ones_like(maskable)
    after_special[:, 1:] = ~maskable[:, :-1]
    starts = _lookup(tables.word_start, ids) if word_starts is None else word_starts.bool()
    is_start = maskable & (starts | after_special)
    return torch.clamp(torch.cumsum(is_start.to(torch.int64), 1) - 1, min=0)


def _budget(
    maskable: torch.Tensor, attention: torch.Tensor, settings: MaskingSettings
) -> torch.Tensor:
    """[B] positions to predict per row (see `MaskingSettings.budget`)."""
    n_maskable = maskable.sum(1)  # [B]
    if settings.budget == "reference" and settings.kind == "span":
        # SpanBERT: math.ceil(len(block) * ratio), the block without [CLS]/[SEP].
        budget = torch.ceil(n_maskable.to(torch.float64) * settings.prob)
    elif settings.budget in ("reference", "electra"):
        # BERT, ALBERT: max(1, int(round(len(tokens) * prob))), [CLS] and [SEP] counted;
        # ELECTRA's pretrain_helpers.mask: the same number of draws.
        real = attention.sum(1).to(torch.float64)
        budget = torch.clamp(torch.round(real * settings.prob), min=1)
    else:
        budget = torch.clamp(torch.round(n_maskable.to(torch.float32) * settings.prob), min=1)
    budget = torch.where(n_maskable > 0, budget.to(torch.int64), 0)
    if settings.max_predictions is not None:
        budget = torch.clamp(budget, max=settings.max_predictions)
    if settings.budget == "electra":
        return torch.where(n_maskable > 0, budget, 0)  # draws: they may repeat
    return torch.minimum(budget, n_maskable)


def _drawn_with_replacement(
    maskable: torch.Tensor, draws: torch.Tensor, key: torch.Tensor
) -> torch.Tensor:
    """[B, L] bool: ELECTRA's positions, `draws[b]` uniform draws from row b's maskable
    positions with replacement (its `tf.random.categorical`), so a repeat masks nothing more."""
    b, length = maskable.shape
    most = int(draws.max()) if b else 0
    masked = torch.zeros_like(maskable)
    if most == 0:
        return masked
    n = maskable.sum(1)  # [B]
    # Row b's maskable positions first, in order; draw d takes the m-th of them.
    order = torch.argsort((~maskable).to(torch.int8), dim=1, stable=True)  # [B, L]
    bits = pair_bits(key[:, None], torch.arange(most, device=maskable.device))  # [B, most]
    m = (bits * n[:, None]) >> 32  # [B, most], < n
    taken = order.gather(1, m.clamp(max=length - 1))  # [B, most]
    valid = torch.arange(most, device=maskable.device) < draws[:, None]
    rows = torch.arange(b, device=maskable.device)[:, None].expand(b, most)
    masked[rows[valid], taken[valid]] = True
    return masked & maskable


def _smallest(packed: torch.Tensor, budget: torch.Tensor) -> torch.Tensor:
    """[B, L] bool: the budget[b] smallest keys of each row of `packed` (keys unique)."""
    most = int(budget.max())
    if most == 0:
        return torch.zeros_like(packed, dtype=torch.bool)
    smallest = torch.topk(packed, most, dim=1, largest=False).values  # [B, most] ascending
    limit = torch.gather(smallest, 1, torch.clamp(budget - 1, min=0)[:, None])  # [B, 1]
    return (packed <= limit) & (budget[:, None] > 0)


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
    stream = stream_keys(keys, _STREAMS)  # [B, 5]
    attention = attention.bool()
    maskable = attention & ~_lookup(tables.special, ids)  # [B, L]
    budget = _budget(maskable, attention, settings)  # [B]
    positions = torch.arange(length, device=ids.device)

    if settings.budget == "electra":
        masked = _drawn_with_replacement(maskable, budget, stream[:, 1])  # [B, L]
        units = positions.expand(b, length)
    elif settings.kind == "token":
        # Every unit is one token: the first `budget` tokens in a random visiting order
        # (BERT's shuffled candidates) are the `budget` smallest of unique keys, a 24-bit
        # score then the position. topk beats a full sort.
        score = row_bits(stream[:, 0], length) >> 8  # [B, L]
        packed = (score.masked_fill(~maskable, 1 << 24) << 20) | positions
        masked = _smallest(packed, budget) & maskable  # [B, L]
        units = positions.expand(b, length)
    else:
        starts = None
        if tables.words is not None:  # on the CPU: the segmenter reads text
            found = tables.words.starts(ids.cpu().numpy(), maskable.cpu().numpy())  # [B, L]
            starts = torch.from_numpy(found).to(ids.device)
        word_of = _words(ids, maskable, tables, starts)  # [B, L], < L
        # wwm is BERT's loop, which is ALBERT's with n-grams of one word.
        cdf = _ONE if settings.kind == "wwm" else _lengths_cdf(settings)
        span = settings.kind == "span"
        draws = (stream[:, 0], stream[:, 4], cdf.to(ids.device))
        masked, units = select_words(span, word_of, maskable, budget, *draws)

    # 80/10/10, per token or (span) per run, drawn only where a position is predicted.
    rows, cols = masked.nonzero(as_tuple=True)  # [M]
    counter = run_starts(masked)[rows, cols] if settings.kind == "span" else cols
    r = to_unit_interval(pair_bits(stream[rows, 2], counter))  # [M]
    to_mask = r < settings.mask_ratio
    to_random = ~to_mask & (r < settings.mask_ratio + settings.random_ratio)
    bits = pair_bits(stream[rows, 3], cols)  # [M]
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
