"""The streaming loader: shards -> shuffled, padded, dynamically masked batches.

```python
from clozeworks.trainer.data import ShardDataset, MaskingSettings
ds = ShardDataset("shards/", batch_size=64, seed=0, masking=MaskingSettings(kind="token"),
                  rank=0, world_size=1)
loader = ds.loader(num_workers=2)
for batch in loader: ...          # one epoch; the next `for` continues with the next epoch
state = loader.state_dict(); loader.load_state_dict(state)
```

Batches are dicts of tensors named as Hugging Face models take them (`input_ids`,
`attention_mask`, `token_type_ids`, `labels`, and `next_sentence_label` or
`sentence_order_label` in pair modes), plus the SBO / WSO fields when asked for
(`trainer.data.masking`). Which sequences form which batch is `trainer.data.plan`'s arithmetic:
every rank gets the same number of batches, and the batch sequence does not depend on the
number of workers, so a loader resumes exactly with 0, 2 or 3 workers. Masks come from
`corpus.shards.masking` keyed by (seed, epoch, global sequence index).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from clozeworks.corpus.shards.blocks import ShardFormatError
from clozeworks.corpus.shards.cache import DEFAULT_LIMIT
from clozeworks.schemas.errors import UsageError
from clozeworks.schemas.kinds import OBJECTIVES, ON_ERROR, OnError
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.config import MAX_EVAL_SPLIT, SHUFFLE_BUFFER, TrainConfig
from clozeworks.trainer.data.collate import collate
from clozeworks.trainer.data.denoising import Denoising
from clozeworks.trainer.data.masking import WSO_PROB, BatchMasker
from clozeworks.trainer.data.objective_specs import check_shards, target_maker
from clozeworks.trainer.data.permutation import PermutationTargets
from clozeworks.trainer.data.plan import DEFAULT_STREAMS, EpochPlan, Layout, remaining_positions
from clozeworks.trainer.data.read import EpochReader, Knowledge
from clozeworks.trainer.data.source import (
    Source,
    checked_tokenizer,
    mask_tables,
    resolve_source,
)
from clozeworks.trainer.data.targets import CausalTargets, SpanCorruption
from clozeworks.trainer.data.transport import SEQUENCES_PER_MESSAGE, Bundle, Item, pack, unpack

STATE_VERSION = 1


class ShardSkippedWarning(UserWarning):
    """A damaged shard was skipped (`on_error="skip"`); issued once per shard."""


class ShardDataset:
    """A shard set as seen by one rank. See the module docstring.

    source: a shard directory, its URL, or a list of shard paths / URLs / `pipe:` commands
        (with `manifest=` for pipes). rank / world_size default to torch.distributed's.
    masking: dynamic masking of unmasked shards (pre-masked shards pass through unchanged).
    objectives: "sbo" and "wso" add their batch fields; sentence labels come with pair modes;
        "clm", "t5", "plm" and "bart" make their targets instead of masking
        (`trainer.data.targets`, `trainer.data.permutation`, `trainer.data.denoising`).
    tokenizer / tokenizer_sha256: the tokenizer the run uses; refused unless it is the one
        the shards were encoded with. Word-level masking needs the tokenizer (the copy
        shipped with the shards is used when none is given).
    verify: check each shard's sha256 before its first use. on_error: "raise" a
        ShardFormatError naming shard and byte offset, or "skip" (one warning per shard,
        counted in the loader's `counters`; the damaged places are filled from other
        shards so that every rank still yields the same number of batches).
    streams: read ranges per rank; the batch order depends on it, not on num_workers.
    length_bucketing: batch sequences of similar length together (within a shuffle window).
    cache_root / cache_limit: where remote shards are kept on disk, and how many bytes at
        most (`corpus.shards.cache`).
    eval_split / part: hold out this share of the sequences (the tail of each shard,
        `ShardSet.split`): part "train" reads the rest, part "eval" only the held-out ones.
    """

    def __init__(
        self,
        source: Source,
        batch_size: int,
        seed: int = 0,
        masking: MaskingSettings | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        shuffle_buffer: int = SHUFFLE_BUFFER,
        tokenizer_sha256: str | None = None,
        *,
        tokenizer: str | Path | None = None,
        manifest: str | Path | None = None,
        objectives: Sequence[str] = ("mlm",),
        verify: bool = False,
        on_error: OnError = TrainConfig.on_error,
        streams: int = DEFAULT_STREAMS,
        length_bucketing: bool = False,
        wso_prob: float = WSO_PROB,
        cache_root: str | Path | None = None,
        cache_limit: int = DEFAULT_LIMIT,
        eval_split: float = TrainConfig.eval_split,
        part: str = "train",
    ) -> None:
        if batch_size < 1:
            raise UsageError(f"batch size must be >= 1, got {batch_size}")
        if streams < 1 or shuffle_buffer < 1:
            raise UsageError("streams and shuffle_buffer must be >= 1")
        if on_error not in ON_ERROR:
            raise UsageError(f"on_error must be one of {', '.join(ON_ERROR)}, got {on_error!r}")
        unknown = sorted(set(objectives) - set(OBJECTIVES))
        if unknown:
            raise UsageError(f"unknown objective(s) {', '.join(unknown)}; known: {OBJECTIVES}")
        self.rank, self.world_size = _rank_and_world(rank, world_size)
        if not 0.0 <= eval_split <= MAX_EVAL_SPLIT or part not in ("train", "eval"):
            raise UsageError(
                f"eval_split must be in [0, {MAX_EVAL_SPLIT}] and part train or eval, got "
                f"{eval_split}, {part!r}"
            )
        root = None if cache_root is None else Path(cache_root)
        self.shards = resolve_source(source, manifest, root, cache_limit)
        if eval_split > 0 or part == "eval":
            train, held = self.shards.split(eval_split)
            self.shards = train if part == "train" else held
        self.part = part
        self.manifest = self.shards.manifest
        self.source = self.shards.location
        self.batch_size = batch_size
        self.seed = seed
        self.masking = masking or MaskingSettings()
        self.verify = verify
        self.on_error = on_error
        self.objectives = tuple(objectives)
        self._check_objectives()
        self.layout = Layout.build(
            self.shards.sizes,
            batch_size,
            self.world_size,
            streams,
            shuffle_buffer,
            length_bucketing,
        )
        self.masker: (
            BatchMasker | CausalTargets | SpanCorruption | PermutationTargets | Denoising | None
        )
        self.masker = None
        own = target_maker(self.objectives)
        if own is not None:
            self.masker = own(self.shards, tokenizer, tokenizer_sha256, self.masking)
        elif self.manifest.premask is None:
            tables = mask_tables(
                self.shards,
                tokenizer,
                tokenizer_sha256,
                self.masking.kind != "token",
                self.masking.draws_by_frequency,
            )
            self.masker = BatchMasker(
                tables,
                self.masking,
                sbo="sbo" in self.objectives,
                wso_prob=wso_prob if "wso" in self.objectives else None,
            )
        elif tokenizer is not None or tokenizer_sha256 is not None:
            checked_tokenizer(self.shards, tokenizer, tokenizer_sha256)

    def _check_objectives(self) -> None:
        check_shards(self.objectives, self.manifest, str(self.source))

    def loader(
        self,
        num_workers: int = TrainConfig.num_workers,
        mask_device: torch.device | str | None = None,
        pin_memory: bool = False,
        prefetch_factor: int = 2,
    ) -> ShardLoader:
        """An iterable of batches. With `mask_device`, workers send unmasked batches and
        masking runs on that device in the training process (same function, same masks)."""
        if num_workers < 0:
            raise UsageError(f"num_workers must be >= 0, got {num_workers}")
        if num_workers > 1 and self.layout.streams % num_workers:
            warnings.warn(
                f"{num_workers} workers do not divide the loader's {self.layout.streams} "
                "read streams: batches are the same, but workers read more than they use",
                stacklevel=2,
            )
        return ShardLoader(self, num_workers, mask_device, pin_memory, prefetch_factor)

    def batches_per_epoch(self) -> int:
        """Batches every rank yields per epoch (the same on every rank)."""
        return self.layout.batches_per_rank()

    def plan(self, epoch: int, history: Stages = (), layout: Layout | None = None) -> EpochPlan:
        """This rank's plan of `epoch` (rank 0's under another `layout` of these shards);
        after `history` (runs with other layouts that began the epoch), the plan of the
        sequences they left."""
        positions = _remaining(self.layout.sizes, self.seed, epoch, history) if history else None
        if layout is None:
            return EpochPlan(self.layout, self.seed, epoch, self.rank, positions)
        return EpochPlan(layout, self.seed, epoch, 0, positions)


def _rank_and_world(rank: int | None, world_size: int | None) -> tuple[int, int]:
    dist = torch.distributed
    if world_size is None:
        world_size = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    if rank is None:
        rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    if world_size < 1 or not 0 <= rank < world_size:
        raise UsageError(f"rank {rank} does not fit world size {world_size}")
    return rank, world_size


def _identity(message: Any) -> Any:
    return message


class _EpochBatches(IterableDataset[Bundle | list[Item]]):
    """Batches start, start+1, ... of one epoch; worker w of n makes every n-th of them and
    sends them in bundles (`trainer.data.transport`); in the calling process, one by one."""

    def __init__(
        self,
        dataset: ShardDataset,
        epoch: int,
        start: int,
        knowledge: Knowledge,
        mask: bool,
        history: Stages = (),
    ) -> None:
        self.dataset = dataset
        self.history = history
        self.epoch = epoch
        self.start = start
        self.knowledge = knowledge
        self.mask = mask

    def __iter__(self) -> Iterator[Bundle | list[Item]]:
        info = get_worker_info()
        if info is None:
            for item in self._items(0, 1):
                yield [item]
            return
        per_message = max(1, SEQUENCES_PER_MESSAGE // self.dataset.batch_size)
        bundle: list[Item] = []
        for item in self._items(info.id, info.num_workers):
            bundle.append(item)
            if len(bundle) == per_message or item.error is not None:
                yield pack(bundle)
                bundle = []
        if bundle:
            yield pack(bundle)

    def _items(self, worker: int, workers: int) -> Iterator[Item]:
        ds = self.dataset
        plan = ds.plan(self.epoch, self.history)
        reader = EpochReader(ds.shards, plan, self.knowledge, ds.verify, ds.on_error)
        pad, mode = ds.manifest.special_tokens["pad"], ds.manifest.mode
        try:
            for j in range(self.start + worker, plan.batches, workers):
                try:
                    pool, sel = reader.batch(j)
                except ShardFormatError as err:
                    yield Item(j, events=_take(reader.events), error=err)
                    return
                batch = collate(pool, sel, pad, mode)
                keys = None
                if ds.masker is not None:
                    assert pool.keys is not None
                    keys = torch.from_numpy(pool.keys[sel])
                    if self.mask:
                        ds.masker(batch, keys)
                        keys = None
                substituted = int(pool.substituted[sel].sum())
                yield Item(j, batch, keys, _take(reader.events), substituted)
        finally:
            reader.close()


def _take(events: list[tuple[str, str, Any]]) -> list[tuple[str, str, Any]]:
    out = list(events)
    events.clear()
    return out


class ShardLoader:
    """Iterates one epoch per `for`; `state_dict()` says where the next batch comes from.

    The state is the same on every rank (all ranks are at the same batch), so a checkpoint
    written by rank 0 resumes every rank.
    """

    def __init__(
        self,
        dataset: ShardDataset,
        num_workers: int = TrainConfig.num_workers,
        mask_device: torch.device | str | None = None,
        pin_memory: bool = False,
        prefetch_factor: int = 2,
    ) -> None:
        self.dataset = dataset
        self.num_workers = num_workers
        self.mask_device = None if mask_device is None else torch.device(mask_device)
        self.pin_memory = pin_memory
        self.prefetch_factor = prefetch_factor
        self.epoch = 0
        self.batches = 0  # batches already yielded in the current epoch
        # Runs with other layouts (world sizes) that began the current epoch, each with the
        # batches every rank of it took: this epoch reads what they left (elastic resume).
        self.history: Stages = ()
        self.knowledge = Knowledge()
        self._reported: set[tuple[str, str]] = set()
        self.counters = {"damaged_shards": 0, "substituted_sequences": 0, "verified_shards": 0}

    def __len__(self) -> int:
        return self.dataset.batches_per_epoch()

    def _epoch_batches(self) -> int:
        if not self.history:
            return self.dataset.batches_per_epoch()
        return self.dataset.plan(self.epoch, self.history).batches

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        ds = self.dataset
        if ds.batches_per_epoch() == 0:  # an empty epoch forever would hang a training loop
            raise UsageError(
                f"{ds.source}: {ds.layout.sequences} sequences do not fill one batch of "
                f"{ds.batch_size} on each of {ds.world_size} rank(s)"
            )
        if self.batches >= self._epoch_batches():
            self.epoch, self.batches, self.history = self.epoch + 1, 0, ()
        epoch, history, expected = self.epoch, self.history, self._epoch_batches()
        mask_here = self.mask_device is not None
        source = _EpochBatches(ds, epoch, self.batches, self.knowledge, not mask_here, history)
        bundles: Iterator[Bundle | list[Item]]
        if self.num_workers == 0:
            bundles = iter(source)
        else:
            bundles = iter(
                DataLoader(
                    source,
                    batch_size=None,
                    num_workers=self.num_workers,
                    collate_fn=_identity,
                    pin_memory=self.pin_memory,
                    prefetch_factor=self.prefetch_factor,
                )
            )
        # Workers' bundles arrive round robin; batches leave in the epoch's order.
        pending: dict[int, Item] = {}
        try:
            for message in bundles:
                items = unpack(message) if isinstance(message, Bundle) else message
                pending.update((item.j, item) for item in items)
                while self.batches in pending:
                    item = pending.pop(self.batches)
                    self._absorb(item)
                    batch = item.batch
                    if self.mask_device is not None:
                        batch = {
                            k: v.to(self.mask_device, non_blocking=True) for k, v in batch.items()
                        }
                        if item.keys is not None and ds.masker is not None:
                            ds.masker(batch, item.keys)
                    self.batches += 1
                    yield batch
        finally:
            close = getattr(bundles, "close", None)
            if close is not None:
                close()
            del bundles
        if pending or self.batches != expected:
            raise RuntimeError(
                f"loader ended epoch {epoch} at batch {self.batches} of {expected}"
            )  # a bug, not bad input
        self.epoch, self.batches, self.history = epoch + 1, 0, ()

    def _absorb(self, item: Item) -> None:
        # Several workers may report the same shard; count and warn once.
        for kind, name, detail in item.events:
            if (kind, name) in self._reported:
                continue
            self._reported.add((kind, name))
            if kind == "verified":
                self.knowledge.verified.add(name)
                self.counters["verified_shards"] += 1
            elif kind == "damaged":
                self.knowledge.damage.setdefault(name, detail)
                self.counters["damaged_shards"] += 1
                warnings.warn(
                    ShardSkippedWarning(
                        f"{detail.message}; skipping the damaged part (on_error='skip'), "
                        "its places are filled from other shards"
                    ),
                    stacklevel=3,
                )
        self.counters["substituted_sequences"] += item.substituted
        if item.error is not None:
            raise item.error

    def state_dict(self) -> dict[str, Any]:
        ds = self.dataset
        return {
            "version": STATE_VERSION,
            "epoch": self.epoch,
            "batches": self.batches,
            "history": [_stage_to_dict(layout, taken) for layout, taken in self.history],
            "seed": ds.seed,
            "layout": ds.layout.to_dict(),
            "counters": dict(self.counters),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume where `state` was taken, with any number of workers. Mid-epoch with the
        same order settings (shards, batch size, world size, streams, shuffle window,
        bucketing) it yields exactly the batches the saved loader would have. With another
        world size, batch size, streams or window (an elastic resume), the rest of the
        epoch is the sequences no rank of the saved run read, dealt to this layout: every
        sequence of the epoch is still read once. A different shard set, or bucketing in
        the saved run (its order depends on lengths), is refused mid-epoch; at an epoch
        boundary any settings resume."""
        ds = self.dataset
        if state.get("seed") != ds.seed:
            raise UsageError(
                f"loader state was saved with seed {state.get('seed')}, this run uses {ds.seed}"
            )
        epoch, batches = int(state["epoch"]), int(state["batches"])
        saved = state.get("layout")
        current = ds.layout.to_dict()
        history = tuple(_stage_from_dict(ds.layout, h) for h in state.get("history", []))
        if batches > 0 and saved != current:
            saved_layout = None if saved is None else _layout_from_dict(ds.layout, saved)
            done = (
                saved_layout is not None
                and batches >= ds.plan(epoch, history, saved_layout).batches
            )
            if done:
                epoch, batches, history = epoch + 1, 0, ()  # saved after an epoch's last batch
            elif saved_layout is not None and _elastic(saved, current):
                history, batches = (*history, (saved_layout, batches)), 0
            else:
                raise UsageError(_layout_mismatch(saved, current, epoch, batches))
        self.epoch, self.batches, self.history = epoch, batches, history
        self.counters.update(state.get("counters", {}))


Stages = tuple[tuple[Layout, int], ...]
_REMAINING: dict[tuple[Any, ...], Any] = {}


def _remaining(sizes: tuple[int, ...], seed: int, epoch: int, history: Stages) -> Any:
    """`plan.remaining_positions`, kept per process (workers and the trainer ask often)."""
    key = (sizes, seed, epoch, history)
    if key not in _REMAINING:
        _REMAINING.clear()
        _REMAINING[key] = remaining_positions(sizes, seed, epoch, list(history))
    return _REMAINING[key]


def _elastic(saved: dict[str, Any], current: dict[str, Any]) -> bool:
    same_data = all(saved.get(k) == current.get(k) for k in ("shards", "sequences"))
    return same_data and not saved.get("bucketing")


def _stage_to_dict(layout: Layout, taken: int) -> dict[str, Any]:
    return {**layout.to_dict(), "batches": taken}


def _stage_from_dict(base: Layout, data: dict[str, Any]) -> tuple[Layout, int]:
    return _layout_from_dict(base, data), int(data["batches"])


def _layout_from_dict(base: Layout, data: dict[str, Any]) -> Layout:
    """A saved layout over this dataset's shards (checked equal by count and total)."""
    return replace(
        base,
        batch_size=int(data["batch_size"]),
        world_size=int(data["world_size"]),
        streams=int(data["streams"]),
        window=int(data["window"]),
        bucketing=bool(data.get("bucketing", False)),
    )


def _layout_mismatch(
    saved: dict[str, Any] | None, current: dict[str, Any], epoch: int, batches: int
) -> str:
    if saved is None:
        diff = "it was saved by an older loader"
    else:
        diff = ", ".join(
            f"{k} {saved.get(k)} -> {v}" for k, v in current.items() if saved.get(k) != v
        )
    return (
        f"cannot resume {batches} batches into epoch {epoch} exactly: {diff}. Resume with "
        "the same settings, or from a checkpoint taken at an epoch boundary"
    )
