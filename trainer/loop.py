"""The training loop. Every piece of state (model, optimizer, scheduler, loader, train state)
has `state_dict()` / `load_state_dict()`; the loop below only drives them.

One step = `grad_accum` micro-batches per rank, gradients averaged over micro-batches and
ranks (DDP), one optimizer step. The step never waits for the device: what depends on the
data's shape is worked out on the host batch (`batch_index`), losses and counters stay on
the device until a log line or checkpoint reads them. A step whose loss or gradient norm is
not finite on any rank updates nothing on every rank (so ranks never diverge), is counted,
and K in a row stop the run at the next log line (`nonfinite`). Rank 0 writes `config.json`,
`metrics.jsonl` and the checkpoints; a checkpoint holds every rank's loader position and
RNG states, so a resumed run is bit-identical.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn

from clozeworks.corpus.locks import OutputLock
from clozeworks.corpus.outputs import LOCAL
from clozeworks.corpus.progress import progress_bar
from clozeworks.schemas.errors import ClozeError, UsageError
from clozeworks.trainer import fsdp, precision
from clozeworks.trainer.assembly import (
    Phase,
    data_summary,
    mix_seed,
    run_model,
    settle_config,
    write_run_config,
)
from clozeworks.trainer.batch_index import prepare, to_device
from clozeworks.trainer.checkpoint import set_rng_state
from clozeworks.trainer.checkpointer import Checkpointer
from clozeworks.trainer.config import TrainConfig
from clozeworks.trainer.data.objective_specs import PERPLEXITY, objective_counts
from clozeworks.trainer.datasets import (
    dataset_for,
    eval_dataset,
    mixture_loader,
)
from clozeworks.trainer.distill.teacher import TEACHER_FILE, check_same_teacher, fingerprint
from clozeworks.trainer.distributed import Dist, setup, teardown
from clozeworks.trainer.metrics import (
    METRICS_FILE,
    MetricsLog,
    Window,
    read,
    read_metrics,
    step_sums,
    summarize,
)
from clozeworks.trainer.nonfinite import MAX_NONFINITE_IN_A_ROW, NonFiniteGuard, check_finite
from clozeworks.trainer.optim import build_optimizer, build_scheduler, warmup_problem
from clozeworks.trainer.precision import LossScaler
from clozeworks.trainer.preempt import StopSignals
from clozeworks.trainer.rundir import CONFIG_FILE, claim_problem
from clozeworks.trainer.tracking import open_trackers

__all__ = [
    "CONFIG_FILE",
    "MAX_NONFINITE_IN_A_ROW",
    "METRICS_FILE",
    "TrainSummary",
    "train",
]


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
    first_loss: float | None  # of `objective`, the run's first (mlm, clm or t5)
    last_loss: float | None
    seconds: float
    checkpoint: Path | None
    history: list[dict[str, Any]] = field(default_factory=list)
    eval: dict[str, float] | None = None
    rank: int = 0  # under torchrun every rank returns a summary; rank 0's is the one to show
    resumed_from: int = 0  # the step this invocation started at (0 for a new run)
    stopped_by: str | None = None  # the signal that stopped the run early (SIGTERM, SIGINT)
    objective: str = "mlm"


def train(
    config: TrainConfig,
    data: str | Path,
    run: Path,
    resume: bool = False,
    progress: bool = True,
    overwrite: bool = False,
    on_commit: Callable[[Path], None] | None = None,
) -> TrainSummary:
    """Train per `config` on the shard set `data` (a directory or a URL of one, see
    `trainer.data.source`), writing the run directory `run`; rank 0 calls `on_commit`
    with each step directory it has committed (`trainer.bucket_run` copies it up).

    Under `torchrun` every rank calls this; rank 0 writes. UsageError / BadInputError for
    a config the data cannot serve or a run directory that is not this run's (see
    `rundir`), ClozeError when the loss stays non-finite.
    """
    warmup = warmup_problem(config.optim, config.max_steps)
    if warmup is not None:
        raise UsageError(warmup)
    d = setup(config.device, config.deterministic)
    # Rank 0 holds the run directory's lock: one run (of any number of ranks) per directory.
    lock = OutputLock(LOCAL, str(run), "train") if d.main else None
    try:
        # Rank 0 decides and every rank raises the same error, so none waits on the others.
        problem = d.gather_json(_claim(lock, Path(run), resume, overwrite) if d.main else None)[0]
        if problem is not None:
            raise UsageError(problem)
        summary = _Run(config, str(data), Path(run), d, on_commit).train(resume, progress)
        # No rank tears the group down while another still uses it (a gloo rank that
        # exited first has been seen to abort its peer at exit).
        d.barrier()
        return summary
    finally:
        if lock is not None:
            lock.release()
        teardown(d)


def _claim(lock: OutputLock | None, run: Path, resume: bool, overwrite: bool) -> str | None:
    """Why rank 0 cannot have `run`: another run holds it, or it is not this run's."""
    if lock is not None:
        try:
            lock.acquire()
        except ClozeError as err:
            return str(err)
    return claim_problem(run, resume, overwrite)


class _Run:
    def __init__(
        self,
        config: TrainConfig,
        data: str | Path,
        run: Path,
        d: Dist,
        on_commit: Callable[[Path], None] | None = None,
    ) -> None:
        data = str(data)
        self.d = d
        self.run = run
        self.on_commit = on_commit
        config, self.phases, tokenizer, self.init_notes = settle_config(config, data, d)
        self.config = config
        self.eval_set = eval_dataset(config, data, d, self.phases[0].manifest)
        if d.main:
            write_run_config(run, config, data, tokenizer, data_summary(self.phases))
        self.model, self.fsdp = run_model(config, d)
        self.optimizer = build_optimizer(self.model, config.optim, d.device)
        self.scheduler = build_scheduler(self.optimizer, config.optim, config.max_steps)
        self.state = TrainState()
        self.checkpointer = Checkpointer(run, config, d, self.model, self.optimizer, self.fsdp)
        self.autocast = partial(precision.autocast, config.precision, d.device)
        self.scaler = LossScaler(config.precision, d.device)
        self.guard = NonFiniteGuard(d.device, allowance=self.scaler.halvings)
        self.signals = StopSignals()
        self._stop_now = False
        # Under DDP, the previous step's all-reduced stop flag, copied to the host without
        # waiting; read one step later, when that copy is long done.
        self._stop_flag: tuple[torch.Tensor, Any] | None = None
        self.window = Window()
        self.step_model: nn.Module = self.model
        if d.active and not self.fsdp:
            ids = [d.device.index] if d.device.type == "cuda" else None
            self.step_model = nn.parallel.DistributedDataParallel(self.model, device_ids=ids)

    def train(self, resume: bool, progress: bool) -> TrainSummary:
        config, d, state = self.config, self.d, self.state
        saved_phase, loader_state = self._resume() if resume else (None, None)
        resumed_from = state.step
        if config.init_from and state.step == 0:
            self.checkpointer.initialize(config.init_from, self.init_notes)
        if config.teacher and state.step:  # every rank: a refusal on one would hang the rest
            check_same_teacher(self.run, config.teacher)
        elif config.teacher and d.main:
            record = json.dumps(fingerprint(config.teacher)) + "\n"
            LOCAL.write_atomic(str(self.run / TEACHER_FILE), record.encode("utf-8"))
            note = getattr(self.model, "teacher_note", None)
            if note:
                print(f"teacher {config.teacher}: {note}", file=sys.stderr, flush=True)
        if resumed_from or config.init_from:
            # Every step from such weights is skipped as non-finite: nothing to train.
            start = f"step {resumed_from} of {self.run}" if resumed_from else config.init_from
            check_finite(self.model, str(start), "resume from an earlier --step or start anew")
        self._skipped_before = state.skipped_nonfinite
        self._resumed_at = resumed_from
        if progress and d.main:
            print(self.startup_summary(), file=sys.stderr, flush=True)
        log = None
        if d.main:
            trackers = open_trackers(config.report_to or (), self.run, config.to_dict(), state.step)
            log = MetricsLog(self.run, trackers, state.step)
        phase_index = _phase_at(self.phases, state.step)
        loader = self._loader(phase_index)
        if loader_state is not None and saved_phase == phase_index:
            loader.load_state_dict(loader_state)
        batches = _forever(loader)

        started = time.perf_counter()
        history: list[dict[str, Any]] = []
        bar = progress_bar(
            config.max_steps, "train", "step", progress and d.main, initial=state.step
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
        main = config.objectives[0]
        return TrainSummary(
            run=self.run,
            steps=state.step,
            first_loss=logged[0][f"{main}_loss"] if logged else None,
            last_loss=logged[-1][f"{main}_loss"] if logged else None,
            objective=main,
            seconds=time.perf_counter() - started,
            checkpoint=last_checkpoint,
            history=history,
            eval=last_eval,
            rank=d.rank,
            resumed_from=resumed_from,
            stopped_by=stopped,
        )

    def startup_summary(self) -> str:
        """One line before the first step: the model, where it runs, and how much of the
        data the run will see (a log's first answer to "is this the run I meant?")."""
        config, d = self.config, self.d
        manifest = self.phases[0].manifest
        parameters = sum(p.numel() for p in self.model.parameters())
        used = precision.resolve(config.precision, d.device)
        per_step = config.batch_size * config.grad_accum * d.world_size
        steps = config.max_steps - self.state.step
        sequences = steps * per_step
        epochs = sequences / max(1, manifest.sequences)
        tokens = sequences * manifest.tokens / max(1, manifest.sequences)
        return (
            f"train: {config.model.family} {parameters:,} parameters, "
            f"{', '.join(config.objectives)}, on {d.device} x{d.world_size} in {used}; "
            f"{steps:,} steps x {per_step} sequences = {sequences:,} sequences, "
            f"{epochs:.2f} epochs of the set's {manifest.sequences:,} sequences "
            f"({manifest.tokens:,} tokens), about {tokens:,.0f} tokens"
        )

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
            micro = [prepare(next(batches), config.unpad) for _ in range(config.grad_accum)]
            sums, grad_norm, sequences, tokens = self._step(micro)
            state.step += 1
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
                self._settle()
                record = self.window.flush(
                    state.step, self.scheduler.get_last_lr()[0], grad_norm, state.skipped_nonfinite
                )
                if self.scaler.enabled:
                    record["loss_scale"] = self.scaler.value
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

    def _step(
        self, micro: list[dict[str, Any]]
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor, int, int]:
        """Forward and backward every micro-batch (host batches, `prepare`d), then one
        optimizer step: the host's share (`_plan`), then the device's (`_apply`), which reads
        no device value on the host.

        Returns the step's sums over all ranks (device tensors), the gradient norm, and this
        rank's sequences and real tokens.
        """
        scale, sequences, tokens = self._plan(micro)
        sums, grad_norm = self._apply(micro, scale)
        return sums, grad_norm, sequences, tokens

    def _plan(self, micro: list[dict[str, Any]]) -> tuple[torch.Tensor, int, int]:
        """From the host batches: each micro-batch's loss weight per objective [M, O] (every
        objective's loss is normalized by its count over the whole global batch, so
        accumulation and DDP give one big batch's gradient), sequences and real tokens."""
        d = self.d
        names = tuple(self.model.loss_weights)  # type: ignore[arg-type]
        counts = torch.tensor([objective_counts(b, names) for b in micro], dtype=torch.float64)
        totals = counts.sum(0)  # [O]
        if d.active:
            totals = d.all_reduce_sum(totals.to(d.device, non_blocking=True))
        scale = counts.to(totals.device, non_blocking=True) * d.world_size / totals.clamp(min=1)
        sequences = sum(int(b["input_ids"].shape[0]) for b in micro)
        tokens = sum(int(b["attention_mask"].sum()) for b in micro)
        return scale.float(), sequences, tokens

    def _apply(
        self, micro: list[dict[str, Any]], scale: torch.Tensor
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        config, d, state = self.config, self.d, self.state
        weights: dict[str, float] = self.model.loss_weights  # type: ignore[assignment]
        names = tuple(weights)
        outputs = []
        for i, host in enumerate(micro):
            batch = to_device(host, d.device)
            last = i == len(micro) - 1
            sync: Any = contextlib.nullcontext()
            if self.fsdp:
                fsdp.set_gradient_sync(self.model, last)
            elif d.active and not last:
                sync = self.step_model.no_sync()  # type: ignore[operator]
            with sync:
                with self.autocast():
                    out = self.step_model(batch, seed=mix_seed(config.seed, state.step, i, d.rank))
                loss = sum(weights[o] * out[f"{o}_loss"] * scale[i, j] for j, o in enumerate(names))
                self.scaler.scale(loss).backward()  # type: ignore[arg-type]
            outputs.append(out)
        self.scaler.unscale(self.optimizer)  # an fp16 overflow: a non-finite norm below
        clip = config.optim.grad_clip if config.optim.grad_clip > 0 else math.inf
        grad_norm = fsdp.full(torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip))
        sums = step_sums(outputs)
        if d.active:
            # Rides on the step's all-reduce: every rank sees every rank's losses (a
            # non-finite one anywhere skips the step everywhere) and stop requests.
            keys = list(sums)
            stop = torch.tensor([1.0 if self.signals.requested else 0.0], dtype=torch.float64)
            vector = torch.cat(
                [
                    torch.stack([sums[k].to(d.device, non_blocking=True) for k in keys]),
                    stop.to(d.device, non_blocking=True),
                ]
            )
            vector = d.all_reduce_sum(vector)
            sums = dict(zip(keys, vector[:-1].unbind(), strict=True))
            self._stop_now = self._previous_stop()
            self._stop_flag = _copy_to_host(vector[-1:])
        else:
            self._stop_now = bool(self.signals.requested)
        finite = torch.isfinite(grad_norm) & torch.isfinite(sums["loss"].to(grad_norm.device))
        # An fp16 overflow is skipped like any non-finite step, and the scale halved.
        self.guard.step(self.optimizer, finite)
        self.scaler.update()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return sums, grad_norm

    def _previous_stop(self) -> bool:
        """The stop flag all-reduced by the previous step (False on the first)."""
        if self._stop_flag is None:
            return False
        value, ready = self._stop_flag
        if ready is not None:
            ready.synchronize()
        return bool(value[0] > 0)

    def _settle(self) -> None:
        """Skipped steps into the train state (a host read: log lines and checkpoints)."""
        skipped, streak = self.guard.settle(self.state.step)
        self.state.skipped_nonfinite += skipped
        self.state.nonfinite_streak = streak

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
                batch = to_device(prepare(batch, config.unpad), d.device)
                out = self.model(batch, seed=mix_seed(config.seed, i, d.rank))
            outputs.append({k: v.detach() for k, v in out.items()})
        self.model.train()
        sums = read(step_sums(outputs))
        sums["batches"] = float(len(outputs))
        if d.active:
            vector = d.all_reduce_sum(torch.tensor(list(sums.values()), dtype=torch.float64))
            sums = dict(zip(sums, vector.tolist(), strict=True))
        record = summarize(sums, int(sums.pop("batches")), prefix="eval_")
        for name in PERPLEXITY:
            if f"eval_{name}_loss" in record:
                loss = record[f"eval_{name}_loss"]
                record[f"eval_{name}_perplexity"] = math.exp(min(loss, 700.0))
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
        saved = self.checkpointer.restore()
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
        self.guard.resume(self.state.nonfinite_streak)
        if "window" in saved:  # checkpoints before the window was saved start a new one
            self.window.load_state_dict(saved["window"])
        self.scaler.load_state_dict(saved.get("scaler", {}))
        mine = ranks[self.d.rank % len(ranks)]
        set_rng_state(mine["rng"])
        if len(ranks) != self.d.world_size:  # ranks past the saved ones: their own stream
            torch.manual_seed(mix_seed(self.config.seed, self.d.rank, self.state.step, 0xE1))
        return int(saved["phase"]), mine["loader"]

    def _save(self, phase_index: int, loader: Any) -> Path | None:
        self._settle()
        self._check_progress()
        state = {
            "scheduler": self.scheduler.state_dict(),
            "train": self.state.state_dict(),
            "window": self.window.state_dict(),
            "scaler": self.scaler.state_dict(),
            "phase": phase_index,
        }
        path = self.checkpointer.save(self.state.step, state, loader)
        if path is not None and self.on_commit is not None:
            self.on_commit(path)
        return path

    def _check_progress(self) -> None:
        """ClozeError, before a checkpoint is committed, when every step this session took
        was skipped as non-finite: a checkpoint of it would hold nothing new. (fp16's first
        steps may all overflow while its loss scale comes down: as many are allowed.)"""
        state, allowed = self.state, self.scaler.halvings
        taken = state.step - self._resumed_at
        skipped = state.skipped_nonfinite - self._skipped_before
        if taken > allowed and skipped >= taken:
            raise ClozeError(
                f"none of the {taken} step(s) since step {self._resumed_at} had a finite loss "
                "and gradient, so none was applied and no checkpoint is written; lower the "
                "learning rate or check the data"
            )


def _phase_at(phases: list[Phase], step: int) -> int:
    return max(i for i, p in enumerate(phases) if p.start_step <= step)


def _forever(loader: Any) -> Iterator[dict[str, torch.Tensor]]:
    while True:
        yield from loader


def _copy_to_host(value: torch.Tensor) -> tuple[torch.Tensor, Any]:
    """A copy of `value` on the host that does not wait for the device, and the event that
    marks it done (None on the CPU)."""
    if value.device.type != "cuda":
        return value.clone(), None
    host = value.to("cpu", non_blocking=True)
    done = torch.cuda.Event()
    done.record()
    return host, done
