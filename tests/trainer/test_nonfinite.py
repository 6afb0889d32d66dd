"""A non-finite step updates nothing (weights, moments, the optimizer's step count) and is
counted; the host learns of it only when the loop settles the guard."""

from __future__ import annotations

import pytest
import torch

from clozeworks.schemas.errors import ClozeError
from clozeworks.trainer.nonfinite import MAX_NONFINITE_IN_A_ROW, NonFiniteGuard


def adamw() -> tuple[torch.nn.Parameter, torch.optim.AdamW]:
    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.randn(8, 4))
    return weight, torch.optim.AdamW([weight], lr=0.1, fused=True)


def step(guard, optimizer, weight, grad) -> None:
    weight.grad = grad
    guard.step(optimizer, torch.isfinite(grad).all())
    optimizer.zero_grad(set_to_none=True)


@pytest.mark.parametrize("fused", [True, False])
def test_a_non_finite_step_leaves_weights_and_moments_alone(fused: bool) -> None:
    weight, optimizer = adamw()
    if not fused:
        optimizer = torch.optim.AdamW([weight], lr=0.1, foreach=True)
    guard = NonFiniteGuard(torch.device("cpu"))
    step(guard, optimizer, weight, torch.ones(8, 4))
    before = weight.detach().clone()
    moments = {k: v.clone() for k, v in optimizer.state[weight].items()}
    bad = torch.ones(8, 4)
    bad[2, 1] = float("nan")
    step(guard, optimizer, weight, bad)
    assert torch.equal(weight, before)
    for key, value in optimizer.state[weight].items():
        assert torch.equal(value, moments[key]), key
    step(guard, optimizer, weight, torch.ones(8, 4))
    assert not torch.equal(weight, before)
    assert float(optimizer.state[weight]["step"]) == 2.0  # the skipped step did not count
    assert guard.settle(step=3) == (1, 0)  # one skipped, no streak now


def test_k_in_a_row_stop_at_the_settle() -> None:
    weight, optimizer = adamw()
    guard = NonFiniteGuard(torch.device("cpu"))
    for _ in range(MAX_NONFINITE_IN_A_ROW - 1):
        step(guard, optimizer, weight, torch.full((8, 4), float("inf")))
    step(guard, optimizer, weight, torch.ones(8, 4))  # a finite step breaks the run
    assert guard.settle(step=5) == (MAX_NONFINITE_IN_A_ROW - 1, 0)
    guard.resume(streak=MAX_NONFINITE_IN_A_ROW - 1)  # a checkpoint's streak goes on
    step(guard, optimizer, weight, torch.full((8, 4), float("nan")))
    with pytest.raises(ClozeError, match=f"not finite for {MAX_NONFINITE_IN_A_ROW} steps"):
        guard.settle(step=6)
