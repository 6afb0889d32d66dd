"""Mixed precision: which autocast a run uses, and fp16's loss scaling.

bf16 has fp32's exponent range, so it needs nothing but autocast. fp16 (GPUs without bf16:
V100, T4) has five exponent bits: small gradients underflow to zero unless the loss is
scaled up before the backward pass and the gradients scaled down before the step, with the
scale lowered when a step overflows and raised again after a run of clean steps (Micikevicius
et al., 2018; torch.amp.GradScaler does exactly this, and is used here).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import torch

from clozeworks.schemas.kinds import PRECISIONS

# GradScaler's default: large enough that small gradients survive fp16, halved on overflow.
INIT_SCALE = 2.0**16

__all__ = ["PRECISIONS", "LossScaler", "autocast", "resolve"]

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve(precision: str, device: torch.device) -> str:
    """What `auto` means on `device`: bf16 autocast on CUDA, fp32 elsewhere (bf16 matmuls
    on a CPU are slower, not faster)."""
    if precision == "auto":
        return "bf16" if device.type == "cuda" else "fp32"
    return precision


def autocast(precision: str, device: torch.device) -> Any:
    dtype = _DTYPES.get(resolve(precision, device))
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


class LossScaler:
    """fp16's dynamic loss scale (a no-op otherwise). The loop scales the loss before
    `backward`, calls `unscale` before it clips and measures the gradients (an overflow
    then shows as a non-finite norm, and the step is skipped like any non-finite one), and
    `update` after the step; the scale is part of the checkpoint."""

    def __init__(self, precision: str, device: torch.device) -> None:
        self.enabled = resolve(precision, device) == "fp16"
        self.scaler = torch.amp.GradScaler(device.type, init_scale=INIT_SCALE, enabled=self.enabled)

    @property
    def halvings(self) -> int:
        """Overflows in a row that bring the scale from its start to 1: skips that are the
        scale's to fix before they are the run's (trainer/nonfinite.py)."""
        return int(math.log2(INIT_SCALE)) if self.enabled else 0

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        return self.scaler.scale(loss) if self.enabled else loss

    def unscale(self, optimizer: torch.optim.Optimizer) -> None:
        if self.enabled:
            self.scaler.unscale_(optimizer)

    def update(self) -> None:
        if self.enabled:
            self.scaler.update()

    @property
    def value(self) -> float:
        """The current scale (1 without fp16): a host read, for log lines."""
        return float(self.scaler.get_scale()) if self.enabled else 1.0

    def state_dict(self) -> dict[str, Any]:
        return self.scaler.state_dict() if self.enabled else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.enabled and state:
            self.scaler.load_state_dict(state)
