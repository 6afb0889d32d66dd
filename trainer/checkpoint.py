"""Checkpoints: a step directory that counts only once its COMMITTED file exists.

`step-NNNNNNN/` holds `model.safetensors`, `optimizer.pt` (tensors and numbers only, loaded
with `weights_only=True`), and `state.json` with the scheduler, loader and train state and
every RNG. The directory is written under a temporary name, `COMMITTED` is written last,
then it is renamed into place: a crash at any point leaves the previous checkpoint intact.

`COMMITTED` records each file's size and sha256, so damage after the fact (a truncated or
replaced file, a flipped byte) is found before anything is loaded: `intact_problem` says
what is wrong, and a resume falls back to the newest intact step.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle  # only for the exception type torch.load raises on refused bytes
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_model, save_model

from clozeworks.corpus.outputs import writing
from clozeworks.schemas.validate import loads

COMMITTED = "COMMITTED"
FILES = ("model.safetensors", "optimizer.pt", "state.json")
STEP_PATTERN = re.compile(r"step-(\d{7})")


def step_dir(run: Path, step: int) -> Path:
    return run / f"step-{step:07d}"


def committed_steps(run: Path) -> list[int]:
    """Steps with a committed checkpoint, ascending."""
    if not run.is_dir():
        return []
    steps = []
    for child in run.iterdir():
        m = STEP_PATTERN.fullmatch(child.name)
        if m and (child / COMMITTED).is_file():
            steps.append(int(m.group(1)))
    return sorted(steps)


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "python": _jsonable(random.getstate()),
        "numpy": _jsonable(np.random.get_state(legacy=False)),
        "torch": torch.get_rng_state().tolist(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state().tolist()  # this rank's device
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    np.random.set_state(state["numpy"])
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(torch.tensor(state["cuda"], dtype=torch.uint8))


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.integer):
        return int(value)
    return value


def save_checkpoint(
    run: Path,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    state: dict[str, Any],
    keep: int,
) -> Path:
    """Write a committed checkpoint for `step` and prune all but the newest `keep`.

    `state` is JSON: scheduler, loader positions, RNG states (`rng_state()` per rank), ...
    """
    final = step_dir(run, step)
    tmp = run / f".{final.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        # A full disk names the checkpoint and leaves no half of it; safetensors and
        # torch.save report a failed write as their own errors.
        with writing(str(tmp), SafetensorError, RuntimeError):
            tmp.mkdir(parents=True)
            save_model(model, str(tmp / "model.safetensors"))
            torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
            (tmp / "state.json").write_text(json.dumps(state), encoding="utf-8")
            _fsync_dir_files(tmp)
            files = {
                f: {"bytes": (tmp / f).stat().st_size, "sha256": _sha256(tmp / f)} for f in FILES
            }
            marker = {"step": step, "files": files}
            (tmp / COMMITTED).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for old in committed_steps(run)[:-keep] if keep > 0 else []:
        # Uncommit first: a crash mid-delete leaves a directory nothing will load.
        (step_dir(run, old) / COMMITTED).unlink()
        shutil.rmtree(step_dir(run, old), ignore_errors=True)
    return final


def _fsync_dir_files(directory: Path) -> None:
    for f in directory.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def intact_problem(path: Path) -> str | None:
    """What is wrong with a committed step directory's files, or None when they are exactly
    what COMMITTED recorded. A marker from before checksums (just the step) is trusted."""
    try:
        text = (path / COMMITTED).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        return f"{COMMITTED} cannot be read ({err})"
    if text.strip().isdigit():
        missing = [f for f in FILES if not (path / f).is_file()]
        return f"{', '.join(missing)} missing" if missing else None
    try:
        files = loads(text)["files"]
        recorded = {f: (int(files[f]["bytes"]), str(files[f]["sha256"])) for f in FILES}
    except (ValueError, KeyError, TypeError) as err:
        return f"{COMMITTED} is damaged ({type(err).__name__}: {err})"
    for name, (size, digest) in recorded.items():
        file = path / name
        if not file.is_file():
            return f"{name} is missing"
        if (found := file.stat().st_size) != size:
            return f"{name} has {found} bytes, {COMMITTED} says {size}"
        if _sha256(file) != digest:
            return f"{name}'s sha256 differs from the one in {COMMITTED}"
    return None


# What loading a damaged step raises: safetensors' and torch's refusals, bad JSON, a state
# missing its keys.
LOAD_ERRORS = (
    SafetensorError,
    pickle.UnpicklingError,
    RuntimeError,
    ValueError,
    KeyError,
    OSError,
    EOFError,
)


class DamagedCheckpoint(Exception):
    """A committed step whose files are not what COMMITTED recorded, or do not load."""


def shape_problem(model: torch.nn.Module, weights: Path) -> str | None:
    """How `weights` (a safetensors file, read by its header alone) fails to fit `model`
    (built on the meta device, so no memory is taken), or None: the first tensor whose
    shape differs. A file that cannot be read is None too: `load_intact` says why."""
    from safetensors import safe_open

    try:
        with safe_open(str(weights), "pt") as f:
            stored = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118
    except (OSError, SafetensorError):
        return None  # damage: `load_intact` names it
    for name, tensor in model.state_dict().items():
        shape = stored.get(name)
        if shape is not None and shape != tuple(tensor.shape):
            return f"{name} is {list(tensor.shape)} by the config, {list(shape)} in {weights}"
    return None


def load_intact(
    path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None
) -> dict[str, Any]:
    """`load_checkpoint` of a step checked first against its COMMITTED record;
    DamagedCheckpoint saying what is wrong instead of whatever a damaged file raises."""
    problem = intact_problem(path)
    if problem is not None:
        raise DamagedCheckpoint(problem)
    try:
        return load_checkpoint(path, model, optimizer)
    except LOAD_ERRORS as err:
        raise DamagedCheckpoint(f"does not load ({type(err).__name__}: {err})") from None


def load_checkpoint(
    path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None
) -> dict[str, Any]:
    """Load weights (and optimizer) from a committed step directory; returns its state."""
    if not (path / COMMITTED).is_file():
        raise FileNotFoundError(f"{path}: not a committed checkpoint")
    load_model(model, str(path / "model.safetensors"))
    if optimizer is not None:
        optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
    state: dict[str, Any] = loads((path / "state.json").read_text(encoding="utf-8"))
    return state
