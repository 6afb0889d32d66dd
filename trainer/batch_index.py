"""What the host works out from a batch before the batch goes to the device.

Which positions a head predicts, and where a padded batch's real tokens are, are shapes that
depend on the data. Found on the GPU (a boolean index, `nonzero`), each one is a host-device
sync: the host waits for the GPU to learn a count before it can queue the next kernel, and
the GPU idles while the host catches up. Found here, on the loader's CPU batch, they travel
with the batch, and a training step queues its whole forward and backward without waiting.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from clozeworks.corpus.shards.masking import IGNORE_INDEX

# Flat positions (row * length + column) where a label key is not IGNORE_INDEX.
INDEX_SUFFIX = "_index"
# StructBERT's word-structure labels, which the masker adds.
WSO_LABELS = "wso_labels"
INDEXED_KEYS = ("labels", WSO_LABELS)
PACKING = "packing"


@dataclass(frozen=True)
class Packing:
    """Where the real tokens of a padded [B, L] batch are: the unpadded encoder runs every
    token-wise layer on these T tokens only, and attention as variable-length sequences."""

    index: torch.Tensor  # [T] flat positions of the real tokens, row-major
    offsets: torch.Tensor  # [B + 1] where each row's tokens start in [T]
    positions: torch.Tensor  # [T] each token's position in its row
    mask: torch.Tensor  # [B, L] bool, the real tokens (attention that runs padded reads it)
    rows: int
    length: int
    # Known on the host, so attention never reads them back from the device.
    min_len: int
    max_len: int

    def to(self, device: torch.device) -> Packing:
        tensors = {"index": self.index, "offsets": self.offsets, "positions": self.positions}
        tensors["mask"] = self.mask
        return replace(self, **{k: v.to(device, non_blocking=True) for k, v in tensors.items()})


def packing(attention_mask: torch.Tensor) -> Packing | None:
    """The layout of a batch whose rows are real tokens then padding; None when there is no
    padding (nothing to skip) or a row is not of that form (kept padded)."""
    mask = attention_mask.bool()  # [B, L]
    rows, length = mask.shape
    lengths = mask.sum(1)  # [B]
    if rows == 0 or bool(mask.all()) or int(lengths.min()) == 0:
        return None
    prefix = torch.arange(length)[None, :] < lengths[:, None]  # [B, L]
    if not torch.equal(prefix, mask):
        return None
    index = mask.flatten().nonzero().squeeze(1)  # [T]
    offsets = torch.zeros(rows + 1, dtype=torch.int64)
    offsets[1:] = lengths.cumsum(0)
    return Packing(
        index=index,
        offsets=offsets,
        positions=index % length,
        mask=mask,
        rows=rows,
        length=length,
        min_len=int(lengths.min()),
        max_len=int(lengths.max()),
    )


def prepare(batch: dict[str, torch.Tensor], unpad: bool) -> dict[str, Any]:
    """The CPU batch with the flat index of every label key and, if `unpad`, its packing."""
    out: dict[str, Any] = dict(batch)
    for key in INDEXED_KEYS:
        if key in batch:
            out[key + INDEX_SUFFIX] = (batch[key].flatten() != IGNORE_INDEX).nonzero().squeeze(1)
    if unpad:
        layout = packing(batch["attention_mask"])
        if layout is not None:
            out[PACKING] = layout
    return out


def to_device(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """Tensors and packing moved without blocking the host (the loader pins its batches)."""
    if device.type == "cpu":
        return batch
    moved: dict[str, Any] = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor):
            moved[key] = value.to(device, non_blocking=True)
        elif isinstance(value, Packing):
            moved[key] = value.to(device)
        else:
            moved[key] = value
    return moved


def flat_index(batch: dict[str, Any], key: str) -> torch.Tensor:
    """Flat positions where `batch[key]` is not IGNORE_INDEX: the host's index if it sent
    one, else found here (a sync on a GPU; callers outside the training step)."""
    index = batch.get(key + INDEX_SUFFIX)
    if index is not None:
        return index
    return (batch[key].flatten() != IGNORE_INDEX).nonzero().squeeze(1)
