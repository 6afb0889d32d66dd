"""Shards in, training batches out: the streaming loader.

`source` opens a shard set (local, fsspec URL, `pipe:`) and checks it against its manifest;
`plan` decides which sequences make which batch for every rank, epoch and resume point;
`read` streams the planned sequences' blocks; `masking` masks them dynamically (the
definition in `corpus.shards.masking`); `collate` pads them into tensors;
`transport` carries worker output to the training process; `loader` ties these into
`ShardDataset` and its resumable `ShardLoader`. Out: dicts of tensors named as Hugging
Face models take them.
"""

from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.data.loader import ShardDataset, ShardLoader, ShardSkippedWarning

__all__ = ["MaskingSettings", "ShardDataset", "ShardLoader", "ShardSkippedWarning"]
