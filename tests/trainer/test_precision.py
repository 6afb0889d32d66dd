"""fp16 with a dynamic loss scale (issue 34, item 7): the scale halves on an overflow and the
step is skipped; the stop for non-finite steps allows for the halvings; the scale is
checkpointed and resumed."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from clozeworks.cli import main
from clozeworks.schemas.errors import ClozeError, SettingError
from clozeworks.trainer.checkpoint import committed_steps, step_dir
from clozeworks.trainer.config import TrainConfig
from clozeworks.trainer.nonfinite import MAX_NONFINITE_IN_A_ROW, NonFiniteGuard
from clozeworks.trainer.precision import LossScaler, autocast, resolve
from tests.trainer.test_resume import losses, train_args

CPU = torch.device("cpu")


def test_auto_and_the_autocast_dtypes() -> None:
    assert resolve("auto", CPU) == "fp32" and resolve("auto", torch.device("cuda")) == "bf16"
    with autocast("fp16", CPU):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float16
    with autocast("bf16", CPU):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    with autocast("fp32", CPU):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
    assert not LossScaler("bf16", CPU).enabled and LossScaler("fp16", CPU).enabled


def test_an_overflow_halves_the_scale_and_skips_the_step() -> None:
    weight = torch.nn.Parameter(torch.ones(1))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    scaler = LossScaler("fp16", CPU)
    guard = NonFiniteGuard(CPU, allowance=scaler.halvings)
    start = scaler.value
    assert start == 2.0**16 and scaler.halvings == 16
    overflows = MAX_NONFINITE_IN_A_ROW + 3  # more in a row than a run without fp16 may skip
    for _ in range(overflows):
        loss = (weight * 3e38).sum()  # finite in fp32; scaled by 2 or more, its gradient is not
        scaler.scale(loss).backward()
        scaler.unscale(optimizer)
        norm = torch.nn.utils.clip_grad_norm_([weight], 1.0)
        guard.step(optimizer, torch.isfinite(norm) & torch.isfinite(loss.detach()))
        scaler.update()
        optimizer.zero_grad()
    assert torch.equal(weight.detach(), torch.ones(1))  # every step was skipped
    assert guard.settle(step=overflows) == (overflows, overflows)  # and no stop yet
    assert scaler.value == start / 2**overflows
    restored = LossScaler("fp16", CPU)
    restored.load_state_dict(scaler.state_dict())
    assert restored.value == scaler.value
    # Past the halvings an overflow is the run's own: the stop comes.
    for _ in range(scaler.halvings):
        guard.step(optimizer, torch.tensor(False))
    with pytest.raises(ClozeError, match="not finite for 24 steps in a row"):
        guard.settle(step=24)
    # Without fp16 the stop comes after MAX_NONFINITE_IN_A_ROW.
    plain = NonFiniteGuard(CPU)
    for _ in range(MAX_NONFINITE_IN_A_ROW):
        plain.step(optimizer, torch.tensor(False))
    with pytest.raises(ClozeError):
        plain.settle(step=5)


def test_fp16_trains_checkpoints_and_resumes_identically(shards_dir, tmp_path) -> None:
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main([*train_args(shards_dir, whole), "--precision", "fp16"]) == 0
    records = [json.loads(line) for line in (whole / "metrics.jsonl").read_text().splitlines()]
    assert all(r["loss_scale"] > 0 for r in records)
    first, last = records[0]["mlm_loss"], records[-1]["mlm_loss"]
    assert last < first, (first, last)  # it learns
    config = json.loads((whole / "config.json").read_text())
    assert config["precision"] == "fp16"
    # Back to the checkpoint at step 8 and resumed: the same losses and scales as the run
    # that went on (the scale is in the checkpoint).
    shutil.copytree(whole, part)
    for step in committed_steps(part):
        if step > 8:
            shutil.rmtree(step_dir(part, step))
    assert main([*train_args(shards_dir, part), "--precision", "fp16", "--resume"]) == 0
    assert losses(part) == losses(whole)
    scales = [json.loads(line)["loss_scale"] for line in (part / "metrics.jsonl").open()]
    assert scales == [r["loss_scale"] for r in records]


def test_fp16_with_fsdp_is_refused() -> None:
    with pytest.raises(SettingError, match="precision fp16 with fsdp"):
        TrainConfig(precision="fp16", fsdp=True)
