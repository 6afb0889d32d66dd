"""Dynamic masking of a collated batch, and the inputs SpanBERT's and StructBERT's
objectives need. One function for the loader workers (CPU) and the training device.

MLM masking is `corpus.shards.masking.mask_tokens`, the definition the static writer uses too.
Random numbers come from its counter-based hash keyed by (seed, epoch, global sequence
index), so every field here is a pure function of those and of the sequence, whatever
the batch, worker or device.

Fields added to a batch (all [B, L], see docs/design.md "Batches"):
- `labels`: original id where MLM predicts, -100 elsewhere.
- SBO (`sbo`): `sbo_left_positions` / `sbo_right_positions`, the positions of the
  tokens just outside the masked span each predicted token is in (x_{s-1}, x_{e+1} in
  the SpanBERT paper; touching spans are one span, as SpanBERT merges them, so these are
  never masked), and `sbo_offsets`, the token's 0-based offset in its span; 0 where
  nothing is predicted.
- WSO (`wso`): StructBERT shuffles some trigrams of unmasked tokens in `input_ids`;
  `wso_labels` holds the original id at each shuffled position (the paper's
  objective: restore the order by predicting each position's token), and
  `wso_positions` the original position of the token now there; -100 elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from clozeworks.corpus.shards.counter_rng import random_bits
from clozeworks.corpus.shards.masking import IGNORE_INDEX, MaskTables, mask_tokens
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.batch_index import WSO_LABELS

# Streams 100+ are this module's (corpus.shards.masking uses 1..99).
_STREAM_WSO_PHASE = 100
_STREAM_WSO_PICK = 101
_STREAM_WSO_PERM = 102
# The five orders of a trigram other than the identity.
_TRIGRAM_PERMS = torch.tensor([[0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]])
# StructBERT (Wang et al. 2020, section 2.2) shuffles 5% of the trigrams.
WSO_PROB = 0.05


class DeviceTables:
    """Masking tables on the CPU, copied to a device the first time a batch there asks."""

    tables: MaskTables
    _on_device: dict[str, MaskTables]

    def __getstate__(self) -> dict[str, object]:
        # Workers get the CPU tables only, never copies already on a GPU.
        return {**self.__dict__, "_on_device": {}}

    def _tables(self, device: torch.device) -> MaskTables:
        if device.type == "cpu":
            return self.tables
        key = str(device)
        if key not in self._on_device:
            self._on_device[key] = self.tables.to(device)
        return self._on_device[key]


@dataclass
class BatchMasker(DeviceTables):
    """Masks collated batches: `masker(batch, keys)` on whatever device the batch is on."""

    tables: MaskTables
    settings: MaskingSettings
    sbo: bool = False
    wso_prob: float | None = None  # None: no word-structure shuffling
    _on_device: dict[str, MaskTables] = field(default_factory=dict, repr=False)

    def __call__(self, batch: dict[str, torch.Tensor], keys: torch.Tensor) -> None:
        """Replace `input_ids` and add `labels` (and the SBO / WSO fields), in place."""
        ids = batch["input_ids"]
        tables = self._tables(ids.device)
        attention = batch["attention_mask"].bool()
        keys = keys.to(ids.device)
        result = mask_tokens(ids, attention, keys, tables, self.settings)
        batch["input_ids"] = result.input_ids
        batch["labels"] = result.labels
        if self.sbo:
            left, right, offsets = span_boundaries(result.masked)
            batch["sbo_left_positions"] = left
            batch["sbo_right_positions"] = right
            batch["sbo_offsets"] = offsets
        if self.wso_prob is not None:
            special = tables.special.index_select(0, ids.reshape(-1)).view(ids.shape)
            free = attention & ~special & ~result.masked
            shuffled, labels, positions = word_structure(
                result.input_ids, free, keys, self.wso_prob
            )
            batch["input_ids"] = shuffled
            batch[WSO_LABELS] = labels
            batch["wso_positions"] = positions


def span_boundaries(masked: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For every predicted token: (left boundary position, right boundary position, offset
    in its span); 0 elsewhere. A span is a maximal run of predicted positions: SpanBERT
    merges touching spans before taking the tokens just outside them (`merge_intervals`,
    external endpoints), so a boundary token is never itself masked. masked [B, L] bool."""
    b, length = masked.shape
    pos = torch.arange(length, device=masked.device).expand(b, length)
    joins_left = torch.zeros_like(masked)
    joins_left[:, 1:] = masked[:, 1:] & masked[:, :-1]
    joins_right = torch.zeros_like(masked)
    joins_right[:, :-1] = joins_left[:, 1:]
    start = torch.cummax(torch.where(masked & ~joins_left, pos, -1), 1).values  # [B, L]
    ends = torch.where(masked & ~joins_right, pos, length)
    end = torch.flip(torch.cummin(torch.flip(ends, [1]), 1).values, [1])  # [B, L]
    zero = torch.zeros_like(pos)
    left = torch.where(masked, start - 1, zero)
    right = torch.where(masked, torch.clamp(end + 1, max=length - 1), zero)
    offsets = torch.where(masked, pos - start, zero)
    return left, right, offsets


def word_structure(
    ids: torch.Tensor, free: torch.Tensor, keys: torch.Tensor, prob: float = WSO_PROB
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """StructBERT's word structure shuffle: (shuffled ids, original ids, original positions).

    Trigrams are aligned at a random phase per row; a trigram of three `free` positions is
    shuffled with probability `prob`, into one of the five orders other than its own.
    Labels and positions are -100 outside shuffled trigrams.
    """
    b, length = ids.shape
    n = length // 3
    labels = torch.full_like(ids, IGNORE_INDEX)
    positions = torch.full_like(ids, IGNORE_INDEX)
    if n == 0:
        return ids, labels, positions
    phase = (random_bits(keys, 1, _STREAM_WSO_PHASE)[:, 0] * 3) >> 32  # [B] in 0..2
    starts = phase[:, None] + 3 * torch.arange(n, device=ids.device)  # [B, T]
    where = starts[:, :, None] + torch.arange(3, device=ids.device)  # [B, T, 3]
    inside = where < length
    clamped = torch.clamp(where, max=length - 1).view(b, -1)
    ok = (torch.gather(free, 1, clamped).view(b, n, 3) & inside).all(2)  # [B, T]
    pick = random_bits(keys, n, _STREAM_WSO_PICK) < int(prob * 4294967296.0)  # [B, T]
    chosen = ok & pick
    perm = _TRIGRAM_PERMS.to(ids.device)[(random_bits(keys, n, _STREAM_WSO_PERM) * 5) >> 32]
    source = starts[:, :, None] + perm  # [B, T, 3]: the position whose token moves here
    rows = torch.arange(b, device=ids.device)[:, None, None].expand(b, n, 3)[chosen]  # [S, 3]
    to, frm = where[chosen], source[chosen]  # [S, 3]
    shuffled = ids.clone()
    shuffled[rows, to] = ids[rows, frm]
    labels[rows, to] = ids[rows, to]
    positions[rows, to] = frm
    return shuffled, labels, positions
