"""Targets of the generative objectives, made from a collated batch of running text.

- `clm` (GPT): `labels` is the next token at every position whose next token is real,
  -100 at a row's last token and at padding. Nothing is masked; the model is causal.
- `t5` (T5's span corruption, Raffel et al. 2020, section 3.1.4): `random_spans_noise_mask`
  of T5's preprocessors chooses exactly round(n x 0.15) noise tokens of a row's n tokens in
  round(noise / 3) spans, the spans and the gaps between them of uniformly random lengths
  (a random composition), a gap first. Each noise span becomes one sentinel in the inputs
  (`<extra_id_0>` for the first span, `<extra_id_1>` next, ...); the targets are each
  sentinel followed by the span it stands for; both end with EOS. A row of 568 tokens
  gives inputs of exactly 512 and targets of 114 (`t5_lengths`), as in T5.

The rows' `[CLS]` and final `[SEP]` (`<s>`, `</s>`) are the shards' wrapping, not text: T5
reads the tokens between them and ends with the `[SEP]` id as its EOS. Random choices are
counter-based hashes of the loader's key of (seed, epoch, global sequence index), so a row's
corruption does not depend on its batch, worker or device, and a resumed run makes the
same.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from clozeworks.corpus.shards.counter_rng import random_bits
from clozeworks.corpus.shards.masking import IGNORE_INDEX
from clozeworks.schemas.errors import UsageError

NOISE_DENSITY = 0.15
MEAN_SPAN = 3.0
# Streams of this module (corpus.shards.masking has 1..99, trainer.data.masking 100..102).
_STREAM_NOISE_CUTS = 110
_STREAM_GAP_CUTS = 111
# Per-row counts T5 objectives report: raw tokens, noise tokens, noise spans.
NOISE_STATS = "noise_stats"
PAD_MULTIPLE = 8


class CausalTargets:
    """`labels` for `clm`: the next token, -100 where there is none."""

    def __call__(self, batch: dict[str, torch.Tensor], keys: torch.Tensor | None = None) -> None:
        ids, real = batch["input_ids"], batch["attention_mask"].bool()
        labels = torch.full_like(ids, IGNORE_INDEX)
        labels[:, :-1] = torch.where(real[:, 1:], ids[:, 1:], IGNORE_INDEX)  # [B, L]
        batch["labels"] = labels
        batch.pop("token_type_ids", None)


def corrupted_lengths(
    tokens: int, density: float = NOISE_DENSITY, mean_span: float = MEAN_SPAN
) -> tuple[int, int]:
    """(inputs, targets) lengths, EOS included, of a row of `tokens` tokens."""
    n = max(tokens, 2)
    noise = min(max(round(n * density), 1), n - 1)
    spans = max(round(noise / mean_span), 1)
    if tokens < 2:  # T5 masks a 2-token row and keeps the first: no noise
        return tokens + 1, tokens + 1
    return tokens - noise + spans + 1, noise + spans + 1


def t5_lengths(
    inputs_length: int, density: float = NOISE_DENSITY, mean_span: float = MEAN_SPAN
) -> tuple[int, int]:
    """(raw tokens, targets length) whose corruption gives inputs of exactly
    `inputs_length`: T5's `compute_input_and_target_lengths` (512 -> (568, 114))."""

    def lengths(tokens: int) -> tuple[int, int]:
        return corrupted_lengths(tokens, density, mean_span)

    tokens = inputs_length
    while lengths(tokens + 1)[0] <= inputs_length:
        tokens += 1
    targets = lengths(tokens)[1]
    if density == 0.5 and targets > inputs_length:
        tokens, targets = tokens - 1, targets - 1
    return tokens, targets


def noise_counts(
    lengths: torch.Tensor, density: float = NOISE_DENSITY, mean_span: float = MEAN_SPAN
) -> tuple[torch.Tensor, torch.Tensor]:
    """(noise tokens, noise spans) per row of `lengths` tokens, as T5 counts them: a row is
    taken as at least 2 long, holds 1 to n - 1 noise tokens, in at least 1 span. Rounding
    is half to even, as numpy's and TensorFlow's."""
    n = lengths.clamp(min=2)
    noise = torch.round(n.double() * density).long()
    noise = torch.minimum(noise.clamp(min=1), n - 1)
    spans = torch.round(noise.double() / mean_span).long().clamp(min=1)
    return noise, spans


def random_compositions(
    totals: torch.Tensor, parts: torch.Tensor, width: int, keys: torch.Tensor, stream: int
) -> torch.Tensor:
    """Lengths [B, width] of `parts` non-empty segments summing to `totals` per row, every
    composition equally likely (T5's `_random_segmentation`: the first item of a segment
    is chosen by shuffling the totals - 1 cut points and keeping parts - 1 of them); 0
    past a row's parts."""
    b = totals.shape[0]
    cuts = width - 1
    scores = random_bits(keys, max(cuts, 1), stream)[:, :cuts]  # [B, C]
    at = torch.arange(cuts, device=totals.device)
    scores = torch.where(at < (totals - 1)[:, None], scores, 1 << 40)  # past the row: last
    rank = scores.argsort(1).argsort(1)  # [B, C]
    first = torch.zeros(b, width, dtype=torch.bool, device=totals.device)
    first[:, 0] = True
    first[:, 1:] = rank < (parts - 1)[:, None]  # item c + 1 starts a segment
    items = torch.arange(width, device=totals.device) < totals[:, None]  # [B, W]
    segment = (first.long().cumsum(1) - 1).clamp(max=width - 1)  # [B, W]
    out = torch.zeros(b, width, dtype=torch.long, device=totals.device)
    return out.scatter_add_(1, segment, items.long())


def noise_mask(
    lengths: torch.Tensor,
    width: int,
    keys: torch.Tensor,
    density: float = NOISE_DENSITY,
    mean_span: float = MEAN_SPAN,
) -> torch.Tensor:
    """T5's `random_spans_noise_mask` for rows of `lengths` tokens: [B, width] bool."""
    n = lengths.clamp(min=2)
    noise, spans = noise_counts(lengths, density, mean_span)
    wide = max(width, 2)
    noise_lengths = random_compositions(noise, spans, wide, keys, _STREAM_NOISE_CUTS)
    gap_lengths = random_compositions(n - noise, spans, wide, keys, _STREAM_GAP_CUTS)
    interleaved = torch.stack([gap_lengths, noise_lengths], 2).flatten(1)  # [B, 2W]: gap first
    ends = interleaved.cumsum(1)
    positions = torch.arange(width, device=lengths.device).expand(len(lengths), width)
    span = torch.searchsorted(ends, positions.contiguous(), right=True)  # [B, W]
    real = positions < lengths[:, None]
    return (span % 2 == 1) & real


def _compact(
    keep: torch.Tensor, values: torch.Tensor, eos: int, pad: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's kept values, in order, then EOS, padded: (ids, real) [B, W']."""
    b = keep.shape[0]
    counts = keep.sum(1)  # [B]
    longest = (int(counts.max()) if len(counts) else 0) + 1
    width = -(-longest // PAD_MULTIPLE) * PAD_MULTIPLE
    out = torch.full((b, width), pad, dtype=values.dtype, device=values.device)
    rows = torch.arange(b, device=values.device)
    column = keep.long().cumsum(1) - 1  # [B, W]
    out[rows[:, None].expand_as(keep)[keep], column[keep]] = values[keep]
    out[rows, counts] = eos
    real = torch.arange(width, device=values.device) <= counts[:, None]
    return out, real


@dataclass
class SpanCorruption:
    """T5's inputs and targets for a collated batch of packed rows, in place: `input_ids`
    and `attention_mask` become the corrupted inputs, `labels` the targets (-100 at
    padding), `noise_stats` [B, 3] the raw tokens, noise tokens and spans of each row."""

    sentinels: torch.Tensor  # [S] ids of <extra_id_0>, <extra_id_1>, ...
    eos: int
    pad: int
    density: float = NOISE_DENSITY
    mean_span: float = MEAN_SPAN

    def __call__(self, batch: dict[str, torch.Tensor], keys: torch.Tensor) -> None:
        ids = batch["input_ids"][:, 1:]  # [B, L-1] without the leading [CLS]
        lengths = batch["attention_mask"].sum(1) - 2  # [B] tokens between [CLS] and [SEP]
        lengths = lengths.clamp(min=0)
        keys = keys.to(ids.device)
        width = ids.shape[1]
        noise = noise_mask(lengths, width, keys, self.density, self.mean_span)  # [B, W]
        real = torch.arange(width, device=ids.device) < lengths[:, None]
        before = torch.zeros_like(noise)
        before[:, 1:] = noise[:, :-1]
        noise_start = noise & ~before
        gap = real & ~noise
        gap_before = torch.zeros_like(gap)
        gap_before[:, 1:] = gap[:, :-1]
        gap_start = gap & ~gap_before
        spans = noise_start.sum(1)
        if len(spans) and int(spans.max()) > len(self.sentinels):
            raise UsageError(
                f"a row of {int(lengths.max())} tokens has {int(spans.max())} noise spans; "
                f"the vocabulary has {len(self.sentinels)} sentinels (cloze vocab --sentinels)"
            )
        table = self.sentinels.to(ids.device)
        top = max(len(table) - 1, 0)
        which = (noise_start.long().cumsum(1) - 1).clamp(0, top)
        inputs = torch.where(noise_start, table[which], ids)
        which = (gap_start.long().cumsum(1) - 1).clamp(0, top)
        targets = torch.where(gap_start, table[which], ids)
        input_ids, input_real = _compact(gap | noise_start, inputs, self.eos, self.pad)
        labels, _ = _compact(noise | gap_start, targets, self.eos, IGNORE_INDEX)
        batch["input_ids"] = input_ids
        batch["attention_mask"] = input_real.long()
        batch["labels"] = labels
        batch[NOISE_STATS] = torch.stack([lengths, noise.sum(1), spans], 1)  # noise ⊆ real
        batch.pop("token_type_ids", None)
