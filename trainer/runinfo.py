"""Summary of a training run directory: model, curves from `metrics.jsonl`, checkpoints,
throughput (keys: docs/inspect.md).

The metrics log is read defensively: every numeric field becomes a curve, so objectives
and accuracies (`loss`, `NAME_loss`, `NAME_accuracy`, held-out `eval_*`, ...) show up
without a change here. A record with a string `split` (or `phase`) other than "train" has
its curves prefixed with it, e.g. `eval/mlm_loss`. A line that is not a JSON object with
an integer `step` (a crash mid-write) is skipped and named in `warnings`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from clozeworks.schemas.errors import BadInputError
from clozeworks.schemas.validate import loads
from clozeworks.trainer.checkpoint import committed_steps, step_dir
from clozeworks.trainer.loop import CONFIG_FILE, METRICS_FILE
from clozeworks.trainer.metrics import read_resumes

# Fields of a metrics record that are not curves.
NOT_CURVES = ("step", "split", "phase", "time", "epoch_time")
SPLIT_FIELDS = ("split", "phase")
THROUGHPUT = ("tokens_per_s", "sequences_per_s")


# What each objective's own statistics should be: its paper's settings.
OBJECTIVE_STATS = {
    "t5_noise_density": 0.15,
    "t5_mean_span": 3.0,
    "plm_predicted_share": 1 / 6,
}


def run_summary(run: Path) -> dict[str, Any]:
    """What a run directory holds; BadInputError if its config.json is unreadable."""
    config = _read_config(run / CONFIG_FILE)
    records, warnings = read_metrics(run / METRICS_FILE)
    curves = metric_curves(records)
    train_records = [r for r in records if _split(r) == "train"]
    steps = committed_steps(run)
    model = config.get("model", {}) if isinstance(config.get("model"), dict) else {}
    return {
        "kind": "run",
        "path": str(run),
        "model": {
            k: model.get(k)
            for k in ("family", "num_layers", "hidden_size", "num_heads", "vocab_size")
        },
        "data": config.get("data"),
        "objectives": config.get("objectives"),
        "max_steps": config.get("max_steps"),
        "batch_size": config.get("batch_size"),
        "logged_steps": len(train_records),
        "last_step": train_records[-1].get("step", 0) if train_records else 0,
        "first": _finite(train_records[0]) if train_records else None,
        "last": _finite(train_records[-1]) if train_records else None,
        "curves": curves,
        "losses": sorted(k for k in curves if k.split("/")[-1].endswith("loss")),
        "accuracies": sorted(k for k in curves if k.split("/")[-1].endswith("accuracy")),
        "perplexities": sorted(k for k in curves if k.split("/")[-1].endswith("perplexity")),
        "objective_stats": {
            name: {"mean": _mean_last(curves[name])["mean"], "paper": paper}
            for name, paper in OBJECTIVE_STATS.items()
            if curves.get(name)
        },
        "checkpoints": [step_dir(run, s).name for s in steps],
        "last_checkpoint": _checkpoint(step_dir(run, steps[-1])) if steps else None,
        "throughput": {k: _mean_last(curves.get(k)) for k in THROUGHPUT},
        # Kept for callers of the first version: the mean of tokens_per_s over log lines.
        "tokens_per_s": _mean_last(curves.get("tokens_per_s"))["mean"],
        "resumes": read_resumes(run),
        "config": config,
        "warnings": warnings,
        "problems": [],
    }


def _read_config(path: Path) -> dict[str, Any]:
    try:
        data = loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInputError(f"{path}: missing, so this is not a training run") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise BadInputError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise BadInputError(f"{path}: expected a JSON object")
    return data


def read_metrics(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of a metrics log, and a warning per line that is not a JSON object."""
    records: list[dict[str, Any]] = []
    warnings: list[str] = []
    if not path.is_file():
        return records, [f"{path}: missing"]
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = loads(line)
            except json.JSONDecodeError:
                warnings.append(f"{path}: line {number} is not JSON (skipped)")
                continue
            if not isinstance(record, dict) or not isinstance(record.get("step"), int):
                warnings.append(f"{path}: line {number} has no integer step (skipped)")
                continue
            records.append(record)
    return records, warnings


def _split(record: dict[str, Any]) -> str:
    for key in SPLIT_FIELDS:
        value = record.get(key)
        if isinstance(value, str):
            return value
    return "train"


def metric_curves(records: list[dict[str, Any]]) -> dict[str, list[list[float]]]:
    """Every numeric field as a curve [[step, value], ...], in log order; non-finite values
    (a diverged loss) are kept as None so a plot shows the gap."""
    curves: dict[str, list[list[Any]]] = {}
    for record in records:
        split = _split(record)
        prefix = "" if split == "train" else f"{split}/"
        for key, value in record.items():
            if key in NOT_CURVES or isinstance(value, bool):
                continue
            if isinstance(value, int | float):
                point = float(value) if math.isfinite(value) else None
                curves.setdefault(prefix + key, []).append([record["step"], point])
    return curves


def _finite(record: dict[str, Any]) -> dict[str, Any]:
    """The record with NaN / inf as None, so --json stays strict JSON."""
    return {
        k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in record.items()
    }


def _mean_last(curve: list[list[Any]] | None) -> dict[str, float | None]:
    values = [v for _, v in curve or [] if v is not None]
    if not values:
        return {"mean": None, "last": None}
    return {"mean": sum(values) / len(values), "last": values[-1]}


def _checkpoint(path: Path) -> dict[str, Any]:
    """Name, size and training position of a committed step directory."""
    state: dict[str, Any] = {}
    try:
        state = loads((path / "state.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        state = {}
    train = state.get("train") if isinstance(state.get("train"), dict) else {}
    return {
        "name": path.name,
        "step": int(path.name.removeprefix("step-")),
        "bytes": sum(f.stat().st_size for f in path.iterdir() if f.is_file()),
        "sequences": train.get("sequences"),
        "tokens": train.get("tokens"),
    }
