"""How batches travel from loader workers to the training process.

A worker sends a `Bundle` of several batches (about `SEQUENCES_PER_MESSAGE` sequences):
their [B, L] fields flattened into one int32 tensor and their [B] fields into one int64
tensor, attention and token-type masks reduced to two numbers per row. The DataLoader
passes each tensor through one shared-memory segment, so a message costs two segments
whatever it holds. Measured with bench/loader at batch 64 x 128, one worker, CPU per
sequence (training process + worker): one tensor per field and batch ~60 us, one pickled
array per batch ~40 us, bundles of 16 batches ~22 us; in the training process alone
~11 us -> ~3 us.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from clozeworks.corpus.shards.blocks import ShardFormatError

SEQUENCES_PER_MESSAGE = 1024
_KEYS, _LENGTHS, _SECOND = "__keys__", "__lengths__", "__second__"


@dataclass
class Item:
    """One batch (unmasked if masking runs on the device), what the worker learned about
    the shards while making it, or the error that stopped the worker."""

    j: int = 0  # the batch's number in the epoch
    batch: dict[str, torch.Tensor] = field(default_factory=dict)
    keys: torch.Tensor | None = None
    events: list[tuple[str, str, Any]] = field(default_factory=list)
    substituted: int = 0
    error: ShardFormatError | None = None

    def pin_memory(self) -> Item:
        pinned = {k: v.pin_memory() for k, v in self.batch.items()}
        keys = None if self.keys is None else self.keys.pin_memory()
        return Item(self.j, pinned, keys, self.events, self.substituted, self.error)


@dataclass
class Bundle:
    """Several items with their tensors in two flat tensors (see the module docstring)."""

    # per item: j, events, substituted, error, [(name, shape)] of 2-d fields, the attention
    # mask's (B, L), [B] field names
    meta: list[tuple[Any, ...]]
    grid: torch.Tensor  # int32, every [B, L] field of every item, flattened
    rows: torch.Tensor  # int64, every [B] field of every item

    def pin_memory(self) -> list[Item]:
        """The DataLoader's pinning thread calls this on what a worker sent."""
        return [item.pin_memory() for item in unpack(self)]


def pack(items: list[Item]) -> Bundle:
    meta: list[tuple[Any, ...]] = []
    grids: list[torch.Tensor] = []
    rows: list[torch.Tensor] = []
    for item in items:
        fields = dict(item.batch)
        shape: tuple[int, ...] = ()
        if fields:
            attention = fields.pop("attention_mask")
            shape = tuple(attention.shape)
            fields[_LENGTHS] = attention.sum(1)
            types = fields.pop("token_type_ids", None)  # T5's batches have none
            if types is not None:
                fields[_SECOND] = torch.where(types.any(1), types.argmax(1), shape[1])
        if item.keys is not None:
            fields[_KEYS] = item.keys
        # [B, *] fields keep their own widths (T5's targets are shorter than its inputs).
        grid_fields = [(k, tuple(v.shape)) for k, v in fields.items() if v.dim() == 2]
        row_names = [k for k, v in fields.items() if v.dim() == 1]
        grids.extend(fields[k].reshape(-1) for k, _ in grid_fields)
        rows.extend(fields[k] for k in row_names)
        meta.append(
            (item.j, item.events, item.substituted, item.error, grid_fields, shape, row_names)
        )
    return Bundle(
        meta=meta,
        grid=torch.cat(grids).to(torch.int32) if grids else torch.zeros(0, dtype=torch.int32),
        rows=torch.cat(rows) if rows else torch.zeros(0, dtype=torch.int64),
    )


def unpack(bundle: Bundle) -> list[Item]:
    grid = bundle.grid.long()  # one conversion for the whole message
    items = []
    g = r = 0
    for j, events, substituted, error, grid_fields, shape, row_names in bundle.meta:
        fields: dict[str, torch.Tensor] = {}
        for name, own in grid_fields:
            size = own[0] * own[1]
            fields[name] = grid[g : g + size].view(own)
            g += size
        for name in row_names:  # only items with a batch have [B] fields
            fields[name] = bundle.rows[r : r + shape[0]]
            r += shape[0]
        if shape:
            positions = torch.arange(shape[1])
            real = positions < fields.pop(_LENGTHS)[:, None]  # [B, L]
            fields["attention_mask"] = real.long()
            if _SECOND in fields:
                second = (positions >= fields.pop(_SECOND)[:, None]) & real
                fields["token_type_ids"] = second.long()
        keys = fields.pop(_KEYS, None)
        items.append(Item(j, fields, keys, events, substituted, error))
    return items
