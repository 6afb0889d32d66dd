"""Shards in, training batches out: the streaming loader.

`source` opens a shard set (local, fsspec URL, `pipe:`) and checks it against its manifest;
`plan` decides which sequences make which batch for every rank, epoch and resume point;
`read` streams the planned sequences' blocks; `masking` masks them dynamically (the
definition in `corpus.shards.masking`); `collate` pads them into tensors;
`transport` carries worker output to the training process; `loader` ties these into
`ShardDataset` and its resumable `ShardLoader`. Out: dicts of tensors named as Hugging
Face models take them.
"""

import warnings
from typing import Any

from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.data.loader import ShardDataset, ShardLoader, ShardSkippedWarning

__all__ = ["MaskingSettings", "ShardDataset", "ShardLoader", "ShardSkippedWarning"]

# Public names that moved, kept working with a warning (CHANGELOG.md says when each goes).
_MOVED = {"MaskingConfig": ("MaskingSettings", MaskingSettings)}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        new, value = _MOVED[name]
        warnings.warn(
            f"clozeworks.trainer.data.{name} is now {new}; the old name goes in 0.3",
            DeprecationWarning,
            stacklevel=2,
        )
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
