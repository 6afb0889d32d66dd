"""`--compile` on the CPU: every family's compiled encoders train to the eager losses, with
unpadded batches of changing size (one recompile, to dynamic shapes), and a compiled run
resumed from a checkpoint ends where the uninterrupted compiled run ends."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file

from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.config import TrainConfig
from clozeworks.trainer.loop import train
from tests.trainer.test_loop import tiny_config

# About 80 s for the file on a 2-core machine (inductor compiles each encoder once, then
# once more to dynamic shapes): kept in the default run, the only check that --compile works.


def tiny(**kw) -> TrainConfig:
    # Without dropout: eager and compiled kernels then compute the same function.
    model = {"dropout": 0.0, "attention_dropout": 0.0, **kw.pop("model", {})}
    optim = {"warmup_steps": 1}
    return tiny_config(model=model, optim=optim, max_steps=4, log_every=1, save_every=2, **kw)


def losses(run) -> list[float]:
    return [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    "config",
    [
        tiny(objectives=("mlm", "nsp")),
        tiny(objectives=("mlm", "nsp", "sbo"), masking=MaskingSettings(kind="span")),
        tiny(objectives=("mlm", "rtd"), model={"family": "electra", "embedding_size": 16}),
    ],
    ids=["bert", "spanbert", "electra"],
)
def test_compiled_training_gives_the_eager_losses(config, nsp_shards, tmp_path) -> None:
    eager = train(config, nsp_shards, tmp_path / "eager", progress=False)
    compiled = train(
        replace(config, compile=True), nsp_shards, tmp_path / "compiled", progress=False
    )
    assert eager.steps == compiled.steps == 4
    a, b = losses(tmp_path / "eager"), losses(tmp_path / "compiled")
    assert a == pytest.approx(b, rel=1e-4), (a, b)


def test_a_compiled_run_resumes_to_the_uninterrupted_weights(nsp_shards, tmp_path) -> None:
    config = replace(tiny(objectives=("mlm", "nsp")), compile=True, deterministic=True)
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    train(config, nsp_shards, whole, progress=False)
    train(config, nsp_shards, cut, progress=False)
    shutil.rmtree(cut / "step-0000004")  # as if killed after step 2's checkpoint
    torch._dynamo.reset()  # a new process: nothing compiled yet
    train(config, nsp_shards, cut, resume=True, progress=False)
    a = load_file(whole / "step-0000004" / "model.safetensors")
    b = load_file(cut / "step-0000004" / "model.safetensors")
    for name in a:
        torch.testing.assert_close(b[name], a[name], atol=0, rtol=0, msg=name)
