"""The training loop. Every piece of state (model, optimizer, scheduler, loader, train state)
has `state_dict()` / `load_state_dict()`; the loop below only drives them."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from schemas.errors import ClozeError, UsageError
from schemas.manifest import TOKENIZER_DIR, read_manifest
from trainer.checkpoint import (
    committed_steps,
    load_checkpoint,
    save_checkpoint,
    set_rng_state,
    step_dir,
)
from trainer.config import TrainConfig
from trainer.data import ShardDataset
from trainer.models.bert import BertForPretraining, decay_groups

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
MAX_NONFINITE_IN_A_ROW = 5


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


def warmup_linear(warmup: int, total: int):  # type: ignore[no-untyped-def]
    """BERT's schedule: linear warm-up to the peak, then linear decay to zero at `total`."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


def build_model(config: TrainConfig) -> BertForPretraining:
    if config.model.family != "bert":
        raise UsageError(f"model family {config.model.family!r} is not available yet")
    torch.manual_seed(config.seed)
    return BertForPretraining(config.model)


def train(
    config: TrainConfig, data: Path, run: Path, resume: bool = False, progress: bool = True
) -> TrainSummary:
    """Train per `config` on the shard set `data`, writing the run directory `run`."""
    manifest = read_manifest(data)
    if "mlm" not in config.objectives or len(config.objectives) != 1:
        raise UsageError(f"objectives {','.join(config.objectives)}: only mlm is available yet")
    config = _fit_to_data(config, manifest.vocab_size, manifest.special_tokens["pad"])
    if manifest.max_seq_len > config.model.max_position:
        raise UsageError(
            f"{data}: sequences of {manifest.max_seq_len} tokens exceed the model's "
            f"{config.model.max_position} positions"
        )
    run.mkdir(parents=True, exist_ok=True)
    _write_config(run, config, data)

    dataset = ShardDataset(
        data,
        batch_size=config.batch_size,
        seed=config.seed,
        masking=config.masking,
        shuffle_buffer=config.shuffle_buffer,
    )
    if dataset.batches_per_epoch() == 0:
        raise UsageError(
            f"{data}: {manifest.sequences} sequences do not fill one batch of {config.batch_size}"
        )
    loader = dataset.loader(num_workers=config.num_workers)
    model = build_model(config)
    optim = config.optim
    optimizer = torch.optim.AdamW(
        decay_groups(model, optim.weight_decay),
        lr=optim.lr,
        betas=(optim.beta1, optim.beta2),
        eps=optim.eps,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_linear(optim.warmup_steps, config.max_steps)
    )
    state = TrainState()

    if resume and committed_steps(run):
        latest = step_dir(run, committed_steps(run)[-1])
        saved = load_checkpoint(latest, model, optimizer)
        scheduler.load_state_dict(saved["scheduler"])
        loader.load_state_dict(saved["loader"])
        state.load_state_dict(saved["train"])
        set_rng_state(saved["rng"])
    _truncate_metrics(run / METRICS_FILE, state.step)

    started = time.perf_counter()
    history: list[dict[str, Any]] = []
    window = _Window()
    last_checkpoint: Path | None = None
    bar = tqdm(total=config.max_steps, initial=state.step, disable=not progress, unit="step")
    model.train()
    while state.step < config.max_steps:
        for batch in loader:
            out = model(
                batch["input_ids"],
                batch["attention_mask"],
                batch["labels"],
                batch["token_type_ids"],
            )
            loss = out["loss"]
            if not math.isfinite(float(loss.detach())):
                state.skipped_nonfinite += 1
                state.nonfinite_streak += 1
                optimizer.zero_grad(set_to_none=True)
                if state.nonfinite_streak >= MAX_NONFINITE_IN_A_ROW:
                    raise ClozeError(
                        f"loss was not finite for {state.nonfinite_streak} steps in a row at step "
                        f"{state.step}; lower the learning rate or check the data"
                    )
                continue
            state.nonfinite_streak = 0
            loss.backward()
            if optim.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), optim.grad_clip)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            state.step += 1
            state.sequences += int(batch["input_ids"].shape[0])
            state.tokens += int(batch["attention_mask"].sum())
            window.add(out, batch)
            bar.update(1)
            if state.step % config.log_every == 0 or state.step == config.max_steps:
                record = window.flush(state, scheduler.get_last_lr()[0])
                history.append(record)
                _append_metrics(run / METRICS_FILE, record)
                bar.set_postfix(mlm_loss=f"{record['mlm_loss']:.3f}")
            if state.step % config.save_every == 0 or state.step == config.max_steps:
                last_checkpoint = save_checkpoint(
                    run,
                    state.step,
                    model,
                    optimizer,
                    {
                        "scheduler": scheduler.state_dict(),
                        "loader": loader.state_dict(),
                        "train": state.state_dict(),
                    },
                    keep=config.keep,
                )
            if state.step >= config.max_steps:
                break
    bar.close()
    logged = _read_metrics(run / METRICS_FILE)
    return TrainSummary(
        run=run,
        steps=state.step,
        first_mlm_loss=logged[0]["mlm_loss"] if logged else None,
        last_mlm_loss=logged[-1]["mlm_loss"] if logged else None,
        seconds=time.perf_counter() - started,
        checkpoint=last_checkpoint,
        history=history,
    )


def _fit_to_data(config: TrainConfig, vocab_size: int, pad_id: int) -> TrainConfig:
    from dataclasses import replace

    return replace(config, model=replace(config.model, vocab_size=vocab_size, pad_token_id=pad_id))


def _write_config(run: Path, config: TrainConfig, data: Path) -> None:
    payload = {**config.to_dict(), "data": str(data), "tokenizer": str(data / TOKENIZER_DIR)}
    (run / CONFIG_FILE).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


class _Window:
    """Sums over the steps since the last log line."""

    def __init__(self) -> None:
        self.reset()
        self.started = time.perf_counter()

    def reset(self) -> None:
        self.steps = 0
        self.mlm_loss = 0.0
        self.correct = 0
        self.count = 0
        self.sequences = 0
        self.tokens = 0

    def add(self, out: dict[str, torch.Tensor], batch: dict[str, torch.Tensor]) -> None:
        self.steps += 1
        self.mlm_loss += float(out["mlm_loss"].detach())
        self.correct += int(out["mlm_correct"])
        self.count += int(out["mlm_count"])
        self.sequences += int(batch["input_ids"].shape[0])
        self.tokens += int(batch["attention_mask"].sum())

    def flush(self, state: TrainState, lr: float) -> dict[str, Any]:
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        record = {
            "step": state.step,
            "mlm_loss": self.mlm_loss / max(1, self.steps),
            "mlm_accuracy": self.correct / max(1, self.count),
            "lr": lr,
            "sequences_per_s": self.sequences / elapsed,
            "tokens_per_s": self.tokens / elapsed,
            "skipped_nonfinite": state.skipped_nonfinite,
        }
        self.reset()
        self.started = time.perf_counter()
        return record


def _append_metrics(path: Path, record: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def _read_metrics(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop log lines past `step`: after a resume the log reads as one uninterrupted run."""
    kept = [r for r in _read_metrics(path) if r["step"] <= step]
    path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
