"""Checkpointing for the loop: save, restore and fall back, under DDP and FSDP alike.

The loop hands the Checkpointer its state objects once and then only says `save(...)` and
`restore()`; the formats are `trainer/checkpoint.py`'s (a step directory that counts once
COMMITTED is written). Under FSDP every rank takes part in gathering the whole weights and
optimizer state, and rank 0 writes them as a plain run would, marked with the optimizer's
format, so a checkpoint is readable without FSDP and refused by a run of the other kind.
`restore` loads the newest committed step whose files are intact, naming each damaged one
it skips, and `initialize` starts a new run from other weights (`--init-from`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.schemas.validate import loads
from clozeworks.trainer import fsdp, init_from
from clozeworks.trainer.checkpoint import (
    DamagedCheckpoint,
    committed_steps,
    load_intact,
    rng_state,
    save_checkpoint,
    shape_problem,
    step_dir,
)
from clozeworks.trainer.config import TrainConfig
from clozeworks.trainer.distributed import Dist
from clozeworks.trainer.families import build_model, described_model

# What a checkpoint's state.json must hold to resume from it.
RESUMABLE = ("ranks", "scheduler", "train", "phase")


class Checkpointer:
    def __init__(
        self,
        run: Path,
        config: TrainConfig,
        d: Dist,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        sharded: bool,
    ) -> None:
        self.run = run
        self.config = config
        self.d = d
        self.model = model
        self.optimizer = optimizer
        self.sharded = sharded  # FSDP: parameters and optimizer state split over the ranks

    def save(self, step: int, state: dict[str, Any], loader: Any) -> Path | None:
        """Commit step `step`: weights, optimizer, `state` (scheduler, train state, ...) and
        every rank's loader position and RNG states. Every rank calls this; rank 0 writes
        and returns the step directory."""
        ranks = self.d.gather_json({"loader": loader.state_dict(), "rng": rng_state()})
        model: nn.Module = self.model
        optimizer: Any = self.optimizer
        if self.sharded:  # every rank takes part; rank 0 receives the whole and writes it
            weights, optim = fsdp.full_state(self.model, self.optimizer)
            if self.d.main:  # a model around the gathered tensors, not a copy of them
                with torch.device("meta"):
                    model = build_model(self.config)
                model.load_state_dict(weights, assign=True)
                optimizer = _Gathered(optim)
        if not self.d.main:
            return None
        state = {**state, "ranks": ranks}
        if self.sharded:
            state["optimizer_format"] = fsdp.OPTIMIZER_FORMAT
        return save_checkpoint(self.run, step, model, optimizer, state, keep=self.config.keep)

    def restore(self) -> dict[str, Any] | None:
        """The state of the newest committed step whose files are intact and load, after
        loading its weights and optimizer into the model; damaged steps are skipped, each
        named once. None for a run with no checkpoint; BadInputError if none is intact."""
        steps = committed_steps(self.run)
        for step in reversed(steps):
            path = step_dir(self.run, step)
            try:
                state = self._load(path)
            except DamagedCheckpoint as err:
                problem = str(err)
            else:
                missing = sorted(set(RESUMABLE) - set(state))
                if not missing:
                    return state
                problem = f"state.json lacks {', '.join(missing)}"
            if self.d.main:
                print(f"resume: skipping {path.name}: {problem}", file=sys.stderr)
        if steps:
            raise BadInputError(f"{self.run}: no intact checkpoint among {len(steps)} committed")
        return None

    def initialize(self, source: str, notes: list[str]) -> None:
        """The model's weights from `source` (a transformers directory, a run or a step
        directory), the report of what matched written beside the run."""
        if self.sharded:  # load whole weights into a plain copy, then scatter the shards
            plain = build_model(self.config)
            report = init_from.load_weights(plain, self.config, source)
            fsdp.load_full(self.model, None, plain.state_dict(), None)
        else:
            report = init_from.load_weights(self.model, self.config, source)
        report.notes += notes
        if self.d.main:
            print(report.line(), file=sys.stderr)
            text = json.dumps(report.to_dict(), indent=2) + "\n"
            (self.run / init_from.REPORT_FILE).write_text(text, encoding="utf-8")

    def _load(self, path: Path) -> dict[str, Any]:
        """Weights and optimizer of a committed step (checked first); its state.json."""
        # Weights of other shapes are not damage but other settings: said once, not skipped
        # step after step (and read from the header alone, before anything is allocated).
        described = described_model(self.config, "the model configured")
        problem = shape_problem(described, path / "model.safetensors")
        if problem is not None:
            raise BadInputError(
                f"{path}: the model configured does not fit its weights: {problem}; resume "
                "with the model settings the run was trained with"
            )
        sharded = _optimizer_format(path) == fsdp.OPTIMIZER_FORMAT
        if sharded != self.sharded:
            how = (
                "by an --fsdp run; resume with --fsdp under torchrun"
                if sharded
                else ("without --fsdp; resume without it")
            )
            raise UsageError(f"{path}: written {how}")
        if not self.sharded:
            return load_intact(path, self.model, self.optimizer)
        plain = build_model(self.config)
        state = load_intact(path, plain, None)
        optim = torch.load(path / "optimizer.pt", weights_only=True)
        fsdp.load_full(self.model, self.optimizer, plain.state_dict(), optim)
        return state


def _optimizer_format(path: Path) -> str | None:
    try:
        state = loads((path / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # load_intact names the damage
    return state.get("optimizer_format") if isinstance(state, dict) else None


class _Gathered:
    """An optimizer state gathered by FSDP, in the shape `save_checkpoint` writes."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def state_dict(self) -> dict[str, Any]:
        return self.state
