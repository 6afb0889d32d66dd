"""Steps whose loss or gradient norm is not finite: their update is skipped, without the
host waiting for the device to say so.

Reading a loss or a norm on the host (`.item()`, `float()`) makes the host wait until the
GPU has finished the step, so it cannot queue the next one meanwhile. The check therefore
stays a device tensor: the fused AdamW takes it as `found_inf` (the argument PyTorch's
GradScaler uses) and leaves weights, moments and its step count untouched when it is set.
Optimizers that cannot take it (LAMB, or an unfused AdamW) read it on the host instead: the
same rule, with a sync. The step still counts (the schedule moves on), as with GradScaler.

Skipped steps and the longest run of them are read at each log line and checkpoint; K in a
row stop the run there with a clear error.
"""

from __future__ import annotations

from typing import Any

import torch

from clozeworks.schemas.errors import ClozeError

MAX_NONFINITE_IN_A_ROW = 5


def nonfinite_parameters(model: torch.nn.Module) -> list[str]:
    """The names of `model`'s parameters holding a NaN or an infinity (one host read). With
    sharded parameters (FSDP's DTensors) each rank checks its shard and the ranks agree, so
    every rank gives the same answer; every rank must call it."""
    named = list(model.named_parameters())
    if not named:
        return []
    local = [getattr(p, "to_local", lambda p=p: p)().detach() for _, p in named]
    finite = torch.stack([t.isfinite().all() for t in local]).to(torch.int32)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(finite, op=torch.distributed.ReduceOp.MIN)
    return [name for (name, _), ok in zip(named, finite.tolist(), strict=True) if not ok]


def check_finite(model: torch.nn.Module, where: str, advice: str) -> None:
    """ClozeError naming `where` and the first parameters that are not finite."""
    bad = nonfinite_parameters(model)
    if bad:
        shown = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        raise ClozeError(f"{where}: weights are not finite ({shown}); {advice}")


def takes_found_inf(optimizer: torch.optim.Optimizer) -> bool:
    """True for optimizers whose step skips itself when `found_inf` is set (fused Adam)."""
    return isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW) and bool(
        optimizer.defaults.get("fused")
    )


class NonFiniteGuard:
    def __init__(self, device: torch.device, allowance: int = 0) -> None:
        self.device = device
        # Skips in a row that are expected before a stop is due: fp16's loss scale halves
        # on each overflow (trainer/precision.py), so a run starting at 2**16 may skip 16
        # steps in a row before its scale is 1 and an overflow is the run's own.
        self.limit = MAX_NONFINITE_IN_A_ROW + allowance
        self._reset(streak=0)

    def _reset(self, streak: int) -> None:
        zero = torch.zeros((), dtype=torch.int64, device=self.device)
        self.skipped = zero.clone()  # since the last settle
        self.streak = zero + streak  # non-finite steps in a row, now
        self.worst = self.streak.clone()  # the longest such run since the last settle

    def resume(self, streak: int) -> None:
        """Continue a checkpointed run: its streak of non-finite steps goes on."""
        self._reset(streak=streak)

    def step(self, optimizer: torch.optim.Optimizer, finite: torch.Tensor) -> None:
        """`optimizer`'s step, applied only if `finite` (a 0-dim bool tensor) is true."""
        bad = (~finite).to(torch.int64)
        if takes_found_inf(optimizer):
            opt: Any = optimizer
            opt.found_inf = bad.to(torch.float32)
            opt.grad_scale = None
            try:
                optimizer.step()
            finally:
                del opt.found_inf, opt.grad_scale
        elif bool(finite):
            optimizer.step()
        self.skipped += bad
        self.streak = (self.streak + 1) * bad
        self.worst = torch.maximum(self.worst, self.streak)

    def settle(self, step: int) -> tuple[int, int]:
        """(skipped since the last settle, the current streak): a host read, for log lines
        and checkpoints. Raises once K steps in a row were not finite."""
        skipped, streak, worst = torch.stack([self.skipped, self.streak, self.worst]).tolist()
        self._reset(streak=streak)
        if worst >= self.limit:
            raise ClozeError(
                f"loss was not finite for {worst} steps in a row by step {step}; "
                "lower the learning rate or check the data"
            )
        return skipped, streak
