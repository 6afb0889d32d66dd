"""The shard sets a run reads: where they are, with which cache, as which datasets."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from clozeworks.schemas.errors import UsageError
from clozeworks.schemas.manifest import Manifest
from clozeworks.trainer.config import TrainConfig
from clozeworks.trainer.data.loader import ShardDataset
from clozeworks.trainer.data.mixture import MixtureLoader, check_compatible
from clozeworks.trainer.data.source import ShardSet, resolve_source
from clozeworks.trainer.distributed import Dist


def dataset_for(
    config: TrainConfig, data: str, batch_size: int, d: Dist, first: Manifest, part: str = "train"
) -> ShardDataset:
    """The run's view of `data` on this rank: part "train", or "eval" (the held-out share
    `config.eval_split` of it)."""
    return ShardDataset(
        data,
        batch_size=batch_size,
        seed=config.seed,
        masking=config.masking,
        rank=d.rank,
        world_size=d.world_size,
        shuffle_buffer=config.shuffle_buffer,
        tokenizer_sha256=first.tokenizer_sha256,
        objectives=config.objectives,
        verify=config.verify_shards,
        on_error=config.on_error,
        **_cache_settings(config),
        eval_split=config.eval_split,
        part=part,
    )


def eval_dataset(config: TrainConfig, data: str, d: Dist, first: Manifest) -> ShardDataset | None:
    """The held-out set: `eval_data`, or the `eval_split` share of `data`, or none."""
    if config.eval_data:
        return dataset_for(config, config.eval_data, config.batch_size, d, first)
    if not config.eval_split:
        return None
    held = dataset_for(config, data, config.batch_size, d, first, part="eval")
    if held.batches_per_epoch() == 0:
        raise UsageError(
            f"eval_split {config.eval_split:g} holds out {held.layout.sequences} sequences of "
            f"{data}: fewer than one batch of {config.batch_size} on each of {d.world_size} "
            "rank(s); hold out more or use a smaller batch"
        )
    return held


def mixture_loader(config: TrainConfig, batch_size: int, d: Dist, first: Manifest) -> MixtureLoader:
    """The loader of `config.mixture`: each set's dataset, one batch kind, drawn by weight."""
    assert config.mixture
    sets = [dataset_for(config, src, batch_size, d, first) for src in config.mixture]
    check_compatible(sets)
    for ds in sets:
        if ds.batches_per_epoch() == 0:
            raise UsageError(
                f"{ds.source}: {ds.layout.sequences} sequences do not fill one batch of "
                f"{batch_size} per rank"
            )
    pin = d.device.type == "cuda"
    loaders = [ds.loader(num_workers=config.num_workers, pin_memory=pin) for ds in sets]
    return MixtureLoader(loaders, list(config.mixture.values()), config.seed, d.rank)


def _cache_settings(config: TrainConfig) -> dict[str, Any]:
    root = None if config.shard_cache is None else Path(config.shard_cache)
    return {"cache_root": root, "cache_limit": int(config.shard_cache_gb * 1e9)}


def resolve(config: TrainConfig, data: str) -> ShardSet:
    """The shard set `data` names, with the run's shard cache."""
    settings = _cache_settings(config)
    return resolve_source(data, None, settings["cache_root"], settings["cache_limit"])


def copy_tokenizer(files: dict[str, bytes], target: Path) -> Path:
    """A tokenizer directory (`tokenizer_files` of a shard set) written to `target`,
    replacing what was there."""
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    shutil.rmtree(target, ignore_errors=True)
    tmp.replace(target)
    return target
