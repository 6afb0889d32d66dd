"""Experiment trackers a run reports to beside `metrics.jsonl` (`--report-to`).

Each is an optional package (an extra), opened by rank 0 only, and given every log line as
scalars under two tag groups (`train/mlm_loss`, `eval/mlm_loss`: `tensorboard_tag`), the
settings once, and the step of each line. A tracker's own switches are its environment
variables, as its users know them: `WANDB_MODE=offline`, `WANDB_PROJECT`,
`MLFLOW_TRACKING_URI`, `MLFLOW_EXPERIMENT_NAME`. W&B writes under the run directory
(`wandb/`) and MLflow, without a tracking URI, to `RUN/mlflow.db` (SQLite). A resumed
run continues the same W&B and MLflow run (their ids are kept in `RUN/tracking.json`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from clozeworks.schemas.errors import UsageError
from clozeworks.schemas.validate import loads

IDS_FILE = "tracking.json"
MLFLOW_DB = "mlflow.db"
# MLflow refuses a parameter value longer than this.
MLFLOW_PARAM_CHARS = 6000


class Tracker(Protocol):
    def log(self, scalars: dict[str, float], step: int) -> None: ...

    def close(self) -> None: ...


def tensorboard_tag(key: str) -> str:
    """A metrics.jsonl key as a tag in one of two groups, so the held-out curves sit apart
    from the training ones: eval_mlm_loss -> eval/mlm_loss, mlm_loss -> train/mlm_loss."""
    if key.startswith("eval_"):
        return f"eval/{key.removeprefix('eval_')}"
    return f"train/{key}"


def _tensorboard(run: Path, config: dict[str, Any], resume_step: int) -> Tracker:
    from torch.utils.tensorboard import SummaryWriter

    # purge_step drops events a killed run wrote past the checkpoint it resumes from; the
    # checkpoint's own step was logged before it was saved, so it stays.
    purge = resume_step + 1 if resume_step else None
    writer = SummaryWriter(str(run / "tensorboard"), purge_step=purge)
    return _TensorBoard(writer)


@dataclass
class _TensorBoard:
    writer: Any

    def log(self, scalars: dict[str, float], step: int) -> None:
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def _wandb(run: Path, config: dict[str, Any], resume_step: int) -> Tracker:
    import wandb

    ids = _ids(run)
    handle = wandb.init(
        project=os.environ.get("WANDB_PROJECT", "clozeworks"),
        name=run.name,
        dir=str(run),
        config=config,
        id=ids.get("wandb"),
        resume="allow",
    )
    _keep_id(run, "wandb", handle.id)
    return _Wandb(handle)


@dataclass
class _Wandb:
    handle: Any

    def log(self, scalars: dict[str, float], step: int) -> None:
        self.handle.log(scalars, step=step)

    def close(self) -> None:
        self.handle.finish()


def _mlflow(run: Path, config: dict[str, Any], resume_step: int) -> Tracker:
    import mlflow

    if not os.environ.get("MLFLOW_TRACKING_URI"):
        mlflow.set_tracking_uri(mlflow_uri(run))
    mlflow.set_experiment(os.environ.get("MLFLOW_EXPERIMENT_NAME", "clozeworks"))
    ids = _ids(run)
    active = mlflow.start_run(
        run_id=ids.get("mlflow"), run_name=None if "mlflow" in ids else run.name
    )
    if "mlflow" not in ids:
        mlflow.log_params(
            {k: str(v)[:MLFLOW_PARAM_CHARS] for k, v in _flat(config).items()}, synchronous=True
        )
    _keep_id(run, "mlflow", active.info.run_id)
    return _Mlflow(mlflow)


@dataclass
class _Mlflow:
    mlflow: Any

    def log(self, scalars: dict[str, float], step: int) -> None:
        self.mlflow.log_metrics(scalars, step=step, synchronous=True)

    def close(self) -> None:
        self.mlflow.end_run()


def mlflow_uri(run: Path) -> str:
    """Where a run's MLflow records go without MLFLOW_TRACKING_URI: a SQLite file in the run
    directory (MLflow 3 refuses its old file store unless told to allow it)."""
    return f"sqlite:///{(run / MLFLOW_DB).resolve()}"


# name -> (opener, the extra that installs it)
TRACKERS: dict[str, tuple[Callable[[Path, dict[str, Any], int], Tracker], str]] = {
    "tensorboard": (_tensorboard, "tensorboard"),
    "wandb": (_wandb, "wandb"),
    "mlflow": (_mlflow, "mlflow"),
}
_MODULES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}


def default_trackers() -> tuple[str, ...]:
    """What a run without `--report-to` reports to: TensorBoard when it is installed."""
    return tuple(n for n in ("tensorboard",) if not missing([n]))


def parse_trackers(text: str) -> tuple[str, ...]:
    """A comma-separated list of trackers (`--report-to`, or `report_to` as a string in a
    config file), each once; `none` for no tracker. ValueError naming an unknown one."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if names == ("none",):
        return ()
    unknown = [n for n in names if n not in TRACKERS]
    if unknown:
        raise ValueError(
            f"unknown tracker(s) {', '.join(unknown)}; choose from {', '.join(TRACKERS)}, none"
        )
    return names


def check_trackers(names: Sequence[str]) -> None:
    """UsageError for a tracker that does not exist."""
    unknown = [n for n in names if n not in TRACKERS]
    if unknown:
        raise UsageError(
            f"unknown tracker(s) {', '.join(unknown)}; choose from {', '.join(TRACKERS)}"
        )


def missing(names: Sequence[str]) -> list[str]:
    """The trackers asked for whose package is not installed."""
    import importlib.util

    return [n for n in names if importlib.util.find_spec(_MODULES[n]) is None]


def require_installed(names: Sequence[str]) -> None:
    """UsageError naming the trackers of `names` that are unknown or not installed, and
    the extra that installs them."""
    check_trackers(names)
    absent = missing(names)
    if absent:
        extras = ",".join(TRACKERS[n][1] for n in absent)
        raise UsageError(
            f"--report-to {','.join(absent)}: not installed (pip install 'clozeworks[{extras}]')"
        )


def open_trackers(
    names: Sequence[str], run: Path, config: dict[str, Any], resume_step: int
) -> list[Tracker]:
    """The trackers `names`, opened."""
    require_installed(names)
    return [TRACKERS[name][0](run, config, resume_step) for name in names]


def scalars_of(record: dict[str, Any]) -> dict[str, float]:
    """A log line's numbers under their tags (the step is the x axis, not a scalar)."""
    return {
        tensorboard_tag(key): float(value)
        for key, value in record.items()
        if key != "step" and isinstance(value, int | float) and not isinstance(value, bool)
    }


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _ids(run: Path) -> dict[str, str]:
    try:
        data = loads((run / IDS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def _keep_id(run: Path, name: str, value: str) -> None:
    ids = {**_ids(run), name: value}
    (run / IDS_FILE).write_text(json.dumps(ids, indent=2) + "\n", encoding="utf-8")
