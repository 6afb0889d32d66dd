"""The training loop. Every piece of state (model, optimizer, scheduler, loader, train state)
has `state_dict()` / `load_state_dict()`; the loop below only drives them.

One step = `grad_accum` micro-batches per rank, gradients averaged over micro-batches and
ranks (DDP), one optimizer step. A step whose loss or gradient norm is not finite on any
rank is skipped on every rank (so ranks never diverge), counted, and K in a row stop the
run. Rank 0 writes `config.json`, `metrics.jsonl` and the checkpoints; a checkpoint holds
every rank's loader position and RNG states, so a resumed run is bit-identical.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm import tqdm

from clozeworks.schemas.errors import BadInputError, ClozeError, UsageError
from clozeworks.schemas.manifest import TOKENIZER_DIR, Manifest
from clozeworks.trainer import init_from, sharding
from clozeworks.trainer.checkpoint import (
    DamagedCheckpoint,
    committed_steps,
    load_intact,
    rng_state,
    save_checkpoint,
    set_rng_state,
    step_dir,
)
from clozeworks.trainer.config import TrainConfig
from clozeworks.trainer.data.source import tokenizer_files
from clozeworks.trainer.datasets import (
    copy_tokenizer,
    dataset_for,
    eval_dataset,
    mixture_loader,
    resolve,
)
from clozeworks.trainer.distributed import Dist, setup, teardown
from clozeworks.trainer.metrics import (
    METRICS_FILE,
    MetricsLog,
    Window,
    read_metrics,
    step_sums,
    summarize,
)
from clozeworks.trainer.models import build_model
from clozeworks.trainer.models.bert import Encoder
from clozeworks.trainer.objectives import check_objectives, objective_counts
from clozeworks.trainer.optim import build_optimizer, build_scheduler, warmup_problem
from clozeworks.trainer.preempt import StopSignals
from clozeworks.trainer.rundir import CONFIG_FILE, claim_problem

MAX_NONFINITE_IN_A_ROW = 5
__all__ = ["CONFIG_FILE", "METRICS_FILE", "TrainSummary", "build_model", "train"]


@dataclass
class TrainState:
    step: int = 0
    sequences: int = 0
    tokens: int = 0
    skipped_nonfinite: int = 0
    nonfinite_streak: int = 0

    def state_dict(self) -> dict[str, Any]:
        return asdict(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            setattr(self, key, value)


@dataclass
class TrainSummary:
    run: Path
    steps: int
    first_mlm_loss: float | None
    last_mlm_loss: float | None
    seconds: float
    checkpoint: Path | None
    history: list[dict[str, Any]] = field(default_factory=list)
    eval: dict[str, float] | None = None
    rank: int = 0  # under torchrun every rank returns a summary; rank 0's is the one to show
    resumed_from: int = 0  # the step this invocation started at (0 for a new run)
    stopped_by: str | None = None  # the signal that stopped the run early (SIGTERM, SIGINT)


@dataclass(frozen=True)
class Phase:
    data: str  # a shard directory, its URL, or a list of shards (trainer.data.source)
    manifest: Manifest
    batch_size: int
    start_step: int


def mix_seed(*parts: int) -> int:
    """A 63-bit seed from integers (seed, step, micro-batch, rank): ELECTRA's sampling."""
    h = 0x9E3779B97F4A7C15
    for p in parts:
        h = ((h ^ (p & 0xFFFFFFFFFFFFFFFF)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        h ^= h >> 31
    return h & 0x7FFFFFFFFFFFFFFF


def train(
    config: TrainConfig,
    data: str | Path,
    run: Path,
    resume: bool = False,
    progress: bool = True,
    overwrite: bool = False,
) -> TrainSummary:
    """Train per `config` on the shard set `data` (a directory or a URL of one, see
    `trainer.data.source`), writing the run directory `run`.

    Under `torchrun` every rank calls this; rank 0 writes. UsageError / BadInputError for
    a config the data cannot serve or a run directory that is not this run's (see
    `rundir`), ClozeError when the loss stays non-finite.
    """
    warmup = warmup_problem(config.optim, config.max_steps)
    if warmup is not None:
        raise UsageError(warmup)
    d = setup(config.device)
    try:
        # Rank 0 decides and every rank raises the same error, so none waits on the others.
        problem = d.gather_json(claim_problem(Path(run), resume, overwrite) if d.main else None)[0]
        if problem is not None:
            raise UsageError(problem)
        summary = _Run(config, str(data), Path(run), d).train(resume, progress)
        # No rank tears the group down while another still uses it (a gloo rank that
        # exited first has been seen to abort its peer at exit).
        d.barrier()
        return summary
    finally:
        teardown(d)


class _Run:
    def __init__(self, config: TrainConfig, data: str | Path, run: Path, d: Dist) -> None:
        data = str(data)
        self.d = d
        self.run = run
        shards = resolve(config, data)
        self.phases = _phases(config, data, shards.manifest)
        first = shards.manifest
        # Read once: the init-from check needs tokenizer.json, rank 0 keeps a copy.
        tokenizer = tokenizer_files(shards) if config.init_from or d.main else {}
        self.init_notes: list[str] = []
        if config.init_from:
            arch, self.init_notes = init_from.model_config(config.init_from, config.model)
            config = replace(config, model=arch)
            shards_json = tokenizer.get("tokenizer.json")
            note = init_from.check_tokenizer(config.init_from, first, shards_json)
            self.init_notes += [note] if note else []
        model_config = replace(
            config.model, vocab_size=first.vocab_size, pad_token_id=first.special_tokens["pad"]
        )
        self.config = config = replace(config, model=model_config)
        for phase in self.phases:
            check_objectives(config, phase.manifest, phase.data)
        self.eval_set = eval_dataset(config, data, d, first)
        if d.main:
            run.mkdir(parents=True, exist_ok=True)
            payload = {**config.to_dict(), "data": data}
            # The run keeps its own copy, so export works when the shards are remote or gone.
            payload["tokenizer"] = str(copy_tokenizer(tokenizer, run / TOKENIZER_DIR))
            (run / CONFIG_FILE).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")

        self.model = build_model(config).to(d.device)
        # Model weights come from `seed` alone; dropout differs per rank.
        torch.manual_seed(mix_seed(config.seed, d.rank, 0xD0))
        self.fsdp = config.fsdp and d.active
        if self.fsdp:  # before the optimizer: it must hold the sharded parameters
            sharding.shard(self.model, Encoder)
        self.optimizer = build_optimizer(self.model, config.optim, d.device)
        self.scheduler = build_scheduler(self.optimizer, config.optim, config.max_steps)
        self.state = TrainState()
        self.autocast = partial(_autocast, config.precision, d.device)
        for module in self.model.modules():
            if isinstance(module, Encoder):
                module.checkpointing = config.grad_checkpointing
        if config.compile:
            # The encoders carry the FLOPs and have static shapes; the heads index with
            # data-dependent masks, which would only cause graph breaks.
            for module in self.model.modules():
                if module.__class__.__name__ == "Encoder":
                    module.compile()
        self.step_model: nn.Module = self.model
        self.signals = StopSignals()
        self._stop_now = False
        self.window = Window()
        if d.active and not self.fsdp:
            ids = [d.device.index] if d.device.type == "cuda" else None
            self.step_model = nn.parallel.DistributedDataParallel(self.model, device_ids=ids)

    def train(self, resume: bool, progress: bool) -> TrainSummary:
        config, d, state = self.config, self.d, self.state
        saved_phase, loader_state = self._resume() if resume else (None, None)
        resumed_from = state.step
        if config.init_from and state.step == 0:
            self._init_weights(config.init_from)
        log = MetricsLog(self.run, config.tensorboard, state.step) if d.main else None
        phase_index = _phase_at(self.phases, state.step)
        loader = self._loader(phase_index)
        if loader_state is not None and saved_phase == phase_index:
            loader.load_state_dict(loader_state)
        batches = _forever(loader)

        started = time.perf_counter()
        history: list[dict[str, Any]] = []
        bar = tqdm(
            total=config.max_steps,
            initial=state.step,
            disable=not (progress and d.main),
            unit="step",
        )
        self.model.train()
        with self.signals:
            stopped = self._loop(loader, batches, phase_index, log, bar, history)
        last_eval, last_checkpoint = self._last_eval, self._last_checkpoint
        bar.close()
        if log is not None:
            log.close()
        if stopped and d.main:
            print(
                f"stopped by {stopped} at step {state.step}: {last_checkpoint} is committed; "
                "--resume continues from it",
                file=sys.stderr,
            )
        logged = read_metrics(self.run / METRICS_FILE) if d.main else history
        return TrainSummary(
            run=self.run,
            steps=state.step,
            first_mlm_loss=logged[0]["mlm_loss"] if logged else None,
            last_mlm_loss=logged[-1]["mlm_loss"] if logged else None,
            seconds=time.perf_counter() - started,
            checkpoint=last_checkpoint,
            history=history,
            eval=last_eval,
            rank=d.rank,
            resumed_from=resumed_from,
            stopped_by=stopped,
        )

    def _init_weights(self, source: str) -> None:
        if self.fsdp:  # load whole weights into a plain copy, then scatter the shards
            plain = build_model(self.config)
            report = init_from.load_weights(plain, self.config, source)
            sharding.load_full(self.model, None, plain.state_dict(), None)
        else:
            report = init_from.load_weights(self.model, self.config, source)
        report.notes += self.init_notes
        if self.d.main:
            print(report.line(), file=sys.stderr)
            text = json.dumps(report.to_dict(), indent=2) + "\n"
            (self.run / init_from.REPORT_FILE).write_text(text, encoding="utf-8")

    def _loop(
        self,
        loader: Any,
        batches: Iterator[dict[str, torch.Tensor]],
        phase_index: int,
        log: MetricsLog | None,
        bar: Any,
        history: list[dict[str, Any]],
    ) -> str | None:
        """Steps until max_steps, or until a stop signal: then the name of the signal."""
        config, d, state = self.config, self.d, self.state
        self._last_eval: dict[str, float] | None = None
        self._last_checkpoint: Path | None = None
        saved_at = -1
        while state.step < config.max_steps:
            if _phase_at(self.phases, state.step) != phase_index:
                phase_index = _phase_at(self.phases, state.step)
                loader = self._loader(phase_index)
                batches = _forever(loader)
            micro = [_to_device(next(batches), d.device) for _ in range(config.grad_accum)]
            sums, grad_norm = self._step(micro)
            if sums is None:
                if self._stop_now:
                    return self._stop(phase_index, loader, saved_at)
                continue
            state.step += 1
            sequences, tokens = int(sums.pop("sequences")), int(sums.pop("tokens"))
            state.sequences += sequences
            state.tokens += tokens
            self.window.add(sums, config.grad_accum * d.world_size, sequences, tokens)
            bar.update(1)

            evaluated = self.eval_set is not None and (
                (config.eval_every and state.step % config.eval_every == 0)
                or state.step == config.max_steps
            )
            if evaluated:
                self._last_eval = self.evaluate()
            if state.step % config.log_every == 0 or state.step == config.max_steps or evaluated:
                record = self.window.flush(
                    state.step, self.scheduler.get_last_lr()[0], grad_norm, state.skipped_nonfinite
                )
                if evaluated and self._last_eval is not None:
                    record.update(self._last_eval)
                history.append(record)
                if log is not None:
                    log.write(record)
                bar.set_postfix(loss=f"{record['loss']:.3f}")
            if state.step % config.save_every == 0 or state.step == config.max_steps:
                self._last_checkpoint = self._save(phase_index, loader)
                saved_at = state.step
            if self._stop_now:
                return self._stop(phase_index, loader, saved_at)
        return None

    def _stop(self, phase_index: int, loader: Any, saved_at: int) -> str:
        """A committed checkpoint of this step (unless one was just written); the name of
        the signal that asked for the stop."""
        if saved_at != self.state.step:
            self._last_checkpoint = self._save(phase_index, loader)
        return self.signals.requested or "a signal on another rank"

    def _step(self, micro: list[dict[str, torch.Tensor]]) -> tuple[dict[str, float] | None, float]:
        """Forward and backward every micro-batch, then one optimizer step.

        Returns the step's sums over all ranks (None if it was skipped) and the gradient norm.
        """
        config, d, state = self.config, self.d, self.state
        weights: dict[str, float] = self.model.loss_weights  # type: ignore[assignment]
        names = tuple(weights)
        counts = torch.tensor([objective_counts(b, names) for b in micro], dtype=torch.float64)
        totals = d.all_reduce_sum(counts.sum(0)).clamp(min=1).tolist()
        outputs = []
        for i, batch in enumerate(micro):
            last = i == len(micro) - 1
            sync: Any = contextlib.nullcontext()
            if self.fsdp:
                sharding.set_gradient_sync(self.model, last)
            elif d.active and not last:
                sync = self.step_model.no_sync()  # type: ignore[operator]
            with sync:
                with self.autocast():
                    out = self.step_model(batch, seed=mix_seed(config.seed, state.step, i, d.rank))
                # Each objective's mean over the whole global batch; DDP averages over ranks,
                # so the world size is multiplied back in.
                loss = sum(
                    weights[o] * out[f"{o}_loss"] * out[f"{o}_count"] * (d.world_size / total)
                    for o, total in zip(names, totals, strict=True)
                )
                loss.backward()  # type: ignore[union-attr]
            outputs.append(out)
        clip = config.optim.grad_clip if config.optim.grad_clip > 0 else math.inf
        grad_norm = sharding.as_float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip))
        sums = step_sums(outputs)
        sums["sequences"] = float(sum(b["input_ids"].shape[0] for b in micro))
        sums["tokens"] = float(sum(int(b["attention_mask"].sum()) for b in micro))
        # Rides on the step's all-reduce: every rank stops after the same step.
        sums["stop"] = 1.0 if self.signals.requested else 0.0
        if d.active:
            vector = d.all_reduce_sum(torch.tensor(list(sums.values()), dtype=torch.float64))
            sums = dict(zip(sums, vector.tolist(), strict=True))
        self._stop_now = sums.pop("stop") > 0
        if not (math.isfinite(grad_norm) and all(math.isfinite(v) for v in sums.values())):
            self.optimizer.zero_grad(set_to_none=True)
            state.skipped_nonfinite += 1
            state.nonfinite_streak += 1
            if state.nonfinite_streak >= MAX_NONFINITE_IN_A_ROW:
                raise ClozeError(
                    f"loss was not finite for {state.nonfinite_streak} steps in a row at step "
                    f"{state.step}; lower the learning rate or check the data"
                )
            return None, grad_norm
        state.nonfinite_streak = 0
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return sums, grad_norm

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Mean losses and accuracies over the first `eval_batches` held-out batches."""
        assert self.eval_set is not None
        config, d = self.config, self.d
        self.model.eval()
        outputs = []
        for i, batch in enumerate(self.eval_set.loader()):
            if i >= config.eval_batches:
                break
            with self.autocast():
                out = self.model(_to_device(batch, d.device), seed=mix_seed(config.seed, i, d.rank))
            outputs.append({k: v.detach() for k, v in out.items()})
        self.model.train()
        sums = step_sums(outputs)
        sums["batches"] = float(len(outputs))
        if d.active:
            vector = d.all_reduce_sum(torch.tensor(list(sums.values()), dtype=torch.float64))
            sums = dict(zip(sums, vector.tolist(), strict=True))
        record = summarize(sums, int(sums.pop("batches")), prefix="eval_")
        if "eval_mlm_loss" in record:
            record["eval_mlm_perplexity"] = math.exp(min(record["eval_mlm_loss"], 700.0))
        return record

    def _loader(self, index: int) -> Any:
        phase = self.phases[index]
        first = self.phases[0].manifest
        if index == 0 and self.config.mixture:
            return mixture_loader(self.config, phase.batch_size, self.d, first)
        dataset = dataset_for(self.config, phase.data, phase.batch_size, self.d, first)
        if dataset.batches_per_epoch() == 0:
            raise UsageError(
                f"{phase.data}: {phase.manifest.sequences} sequences do not fill one batch of "
                f"{phase.batch_size} per rank"
            )
        return dataset.loader(
            num_workers=self.config.num_workers, pin_memory=self.d.device.type == "cuda"
        )

    def _resume(self) -> tuple[int | None, dict[str, Any] | None]:
        saved = self._newest_intact()
        if saved is None:
            return None, None
        ranks = saved["ranks"]
        if len(ranks) != self.d.world_size and self.d.main:
            # The loader state is the same on every rank; the loader deals the rest of the
            # epoch to the new ranks (each sequence still read once). Dropout streams and
            # the global batch size change with the number of ranks.
            print(
                f"resume: the checkpoint was written by {len(ranks)} rank(s), this run has "
                f"{self.d.world_size}: the rest of the epoch is dealt to the new ranks",
                file=sys.stderr,
            )
        self.scheduler.load_state_dict(saved["scheduler"])
        self.state.load_state_dict(saved["train"])
        if "window" in saved:  # checkpoints before the window was saved start a new one
            self.window.load_state_dict(saved["window"])
        mine = ranks[self.d.rank % len(ranks)]
        set_rng_state(mine["rng"])
        if len(ranks) != self.d.world_size:  # ranks past the saved ones: their own stream
            torch.manual_seed(mix_seed(self.config.seed, self.d.rank, self.state.step, 0xE1))
        return int(saved["phase"]), mine["loader"]

    def _newest_intact(self) -> dict[str, Any] | None:
        """The state of the newest committed step whose files are intact and load, after
        loading its weights and optimizer; damaged steps are skipped, each named once."""
        steps = committed_steps(self.run)
        for step in reversed(steps):
            path = step_dir(self.run, step)
            try:
                state = self._load(path)
            except DamagedCheckpoint as err:
                problem = str(err)
            else:
                missing = sorted({"ranks", "scheduler", "train", "phase"} - set(state))
                if not missing:
                    return state
                problem = f"state.json lacks {', '.join(missing)}"
            if self.d.main:
                print(f"resume: skipping {path.name}: {problem}", file=sys.stderr)
        if steps:
            raise BadInputError(f"{self.run}: no intact checkpoint among {len(steps)} committed")
        return None

    def _load(self, path: Path) -> dict[str, Any]:
        """Weights and optimizer of a committed step (checked first); its state.json."""
        sharded = _optimizer_format(path) == sharding.OPTIMIZER_FORMAT
        if sharded != self.fsdp:
            how = (
                "by an --fsdp run; resume with --fsdp under torchrun"
                if sharded
                else ("without --fsdp; resume without it")
            )
            raise UsageError(f"{path}: written {how}")
        if not self.fsdp:
            return load_intact(path, self.model, self.optimizer)
        plain = build_model(self.config)
        state = load_intact(path, plain, None)
        optim = torch.load(path / "optimizer.pt", weights_only=True)
        sharding.load_full(self.model, self.optimizer, plain.state_dict(), optim)
        return state

    def _save(self, phase_index: int, loader: Any) -> Path | None:
        ranks = self.d.gather_json({"loader": loader.state_dict(), "rng": rng_state()})
        model: nn.Module = self.model
        optimizer: Any = self.optimizer
        if self.fsdp:  # every rank takes part; rank 0 receives the whole and writes it
            weights, optim = sharding.full_state(self.model, self.optimizer)
            if self.d.main:  # a model around the gathered tensors, not a copy of them
                with torch.device("meta"):
                    model = build_model(self.config)
                model.load_state_dict(weights, assign=True)
                optimizer = _Saved(optim)
        if not self.d.main:
            return None
        state = {
            "scheduler": self.scheduler.state_dict(),
            "train": self.state.state_dict(),
            "window": self.window.state_dict(),
            "phase": phase_index,
            "ranks": ranks,
        }
        if self.fsdp:
            state["optimizer_format"] = sharding.OPTIMIZER_FORMAT
        return save_checkpoint(
            self.run, self.state.step, model, optimizer, state, keep=self.config.keep
        )


def _optimizer_format(path: Path) -> str | None:
    try:
        state = json.loads((path / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # load_intact names the damage
    return state.get("optimizer_format") if isinstance(state, dict) else None


class _Saved:
    """An optimizer state gathered by FSDP, in the shape `save_checkpoint` writes."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def state_dict(self) -> dict[str, Any]:
        return self.state


def _phases(config: TrainConfig, data: str, manifest: Manifest) -> list[Phase]:
    phases = [Phase(data, manifest, config.batch_size, 0)]
    if config.phase2 is not None:
        p2 = config.phase2
        if not 0 < p2.start_step < config.max_steps:
            raise UsageError(
                f"phase2.start_step {p2.start_step} must be between 0 and max_steps "
                f"{config.max_steps}"
            )
        manifest = resolve(config, p2.data).manifest
        batch = p2.batch_size or config.batch_size
        phases.append(Phase(p2.data, manifest, batch, p2.start_step))
    for phase in phases:
        if phase.manifest.max_seq_len > config.model.max_position:
            raise UsageError(
                f"{phase.data}: sequences of {phase.manifest.max_seq_len} tokens exceed the "
                f"model's {config.model.max_position} positions"
            )
    return phases


def _phase_at(phases: list[Phase], step: int) -> int:
    return max(i for i, p in enumerate(phases) if p.start_step <= step)


def _forever(loader: Any) -> Iterator[dict[str, torch.Tensor]]:
    while True:
        yield from loader


def _to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    if device.type == "cpu":
        return batch
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def _autocast(precision: str, device: torch.device) -> Any:
    if precision == "bf16" or (precision == "auto" and device.type == "cuda"):
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
