"""What the loop reports: per-step sums, the `metrics.jsonl` log and the trackers.

One JSON line per logged step with `step`, `loss`, per objective NAME `NAME_loss` and
`NAME_accuracy`, ratios a model reports as `KEY_num` / `KEY_den` under KEY (T5's
`t5_noise_density`, `t5_mean_span`), `lr`, `grad_norm`, `sequences_per_s`, `tokens_per_s`,
`skipped_nonfinite`, and `eval_*` keys on the steps a held-out evaluation ran.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from clozeworks.schemas.validate import loads
from clozeworks.trainer.tracking import Tracker, scalars_of

METRICS_FILE = "metrics.jsonl"
RESUMES_FILE = "resumes.json"


def step_sums(outputs: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Sums over one step's micro-batches: every NAME_loss, NAME_correct, NAME_count.

    Tensors where the model left them (on the device): reading them is a host-device sync,
    which the loop leaves to its log lines.
    """
    sums: dict[str, torch.Tensor] = {}
    for out in outputs:
        for key, value in out.items():
            if key.endswith(("_loss", "_correct", "_count", "_num", "_den")) or key == "loss":
                value = value.detach().to(torch.float64)
                sums[key] = sums[key] + value if key in sums else value
    return sums


def read(sums: dict[str, Any]) -> dict[str, float]:
    """Host floats from tensors (one sync per device), for a log line or a checkpoint."""
    return {key: float(value) for key, value in sums.items()}


def summarize(sums: dict[str, float], batches: int, prefix: str = "") -> dict[str, float]:
    """Mean losses per batch and accuracies (correct / count) from summed outputs."""
    record: dict[str, float] = {}
    for key, value in sums.items():
        if key == "loss" or key.endswith("_loss"):
            record[prefix + key] = value / max(1, batches)
        elif key.endswith("_correct"):
            name = key.removesuffix("_correct")
            record[f"{prefix}{name}_accuracy"] = value / max(1.0, sums.get(f"{name}_count", 0.0))
        elif key.endswith("_num"):
            name = key.removesuffix("_num")
            record[prefix + name] = value / max(1.0, sums.get(f"{name}_den", 0.0))
    return record


class Window:
    """Sums over the steps since the last log line."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.started = time.perf_counter()
        self.steps = 0
        self.batches = 0
        self.sums: dict[str, Any] = {}  # floats or tensors: read at flush
        self.sequences = 0
        self.tokens = 0

    def state_dict(self) -> dict[str, Any]:
        """The sums so far (a checkpoint between log lines keeps them, so the next line
        after a resume covers the same steps as without the interruption)."""
        return {
            "steps": self.steps,
            "batches": self.batches,
            "sums": read(self.sums),
            "sequences": self.sequences,
            "tokens": self.tokens,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.reset()
        self.steps = int(state["steps"])
        self.batches = int(state["batches"])
        self.sums = {k: float(v) for k, v in state["sums"].items()}
        self.sequences = int(state["sequences"])
        self.tokens = int(state["tokens"])

    def add(self, sums: dict[str, Any], batches: int, sequences: int, tokens: int) -> None:
        self.steps += 1
        self.batches += batches
        for key, value in sums.items():
            self.sums[key] = self.sums.get(key, 0.0) + value
        self.sequences += sequences
        self.tokens += tokens

    def flush(self, step: int, lr: float, grad_norm: Any, skipped: int) -> dict[str, Any]:
        record: dict[str, Any] = {"step": step, **summarize(read(self.sums), self.batches)}
        # After the reads: they wait for the device, so the rate covers the steps' work.
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        record.update(
            lr=lr,
            grad_norm=float(grad_norm),
            sequences_per_s=self.sequences / elapsed,
            tokens_per_s=self.tokens / elapsed,
            skipped_nonfinite=skipped,
        )
        self.reset()
        return record


class MetricsLog:
    """`metrics.jsonl` and the trackers of `--report-to` (trainer/tracking.py), written by
    rank 0."""

    def __init__(self, run: Path, trackers: Sequence[Tracker], resume_step: int) -> None:
        self.path = run / METRICS_FILE
        kept = [r for r in read_metrics(self.path) if r["step"] <= resume_step]
        # After a resume the log reads as one uninterrupted run.
        self.path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
        # Where the curves continue from a checkpoint, for plots to mark; resumes past
        # this one belong to a history that this resume abandons.
        marks = [s for s in read_resumes(run) if s < resume_step]
        resumes = run / RESUMES_FILE
        resumes.write_text(json.dumps([*marks, resume_step] if resume_step else marks))
        self.trackers = list(trackers)

    def write(self, record: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        scalars = scalars_of(record)
        for tracker in self.trackers:
            tracker.log(scalars, record["step"])

    def close(self) -> None:
        for tracker in self.trackers:
            tracker.close()


def read_resumes(run: Path) -> list[int]:
    """The steps this run was resumed from, in order (`resumes.json`; [] if none)."""
    try:
        marks = loads((run / RESUMES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [m for m in marks if isinstance(m, int)] if isinstance(marks, list) else []


def read_metrics(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = loads(line) if line else None
        except ValueError:
            continue  # a line cut by a kill, or damage: `inspect` of the run names it
        if isinstance(row, dict):
            rows.append(row)
    return rows
