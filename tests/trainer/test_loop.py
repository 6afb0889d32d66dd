"""The loop's promises, in process: resuming from any committed checkpoint ends bit-identical
for every family and feature, accumulation equals one big batch, non-finite steps stop the run
with a clear message, and held-out evaluation lands in metrics.jsonl."""

import json
import shutil
import time
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file

from clozeworks.schemas.errors import BadInputError, ClozeError
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.batch_index import prepare
from clozeworks.trainer.config import ModelConfig, OptimConfig, Phase2Config, TrainConfig
from clozeworks.trainer.distributed import Dist
from clozeworks.trainer.loop import _Run, train
from clozeworks.trainer.metrics import read_resumes

TIMING = ("tokens_per_s", "sequences_per_s")


def tiny_config(**kw) -> TrainConfig:
    model = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    base = TrainConfig(
        model=replace(model, **kw.pop("model", {})),
        optim=OptimConfig(**{"lr": 5e-4, "warmup_steps": 2, **kw.pop("optim", {})}),
        batch_size=8,
        max_steps=8,
        save_every=4,
        keep=10,
        log_every=2,
        shuffle_buffer=64,
        report_to=(),
    )
    return replace(base, **kw)


def logged(run) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines]


def weights(run, step: int) -> dict[str, torch.Tensor]:
    return load_file(run / f"step-{step:07d}" / "model.safetensors")


CASES = {
    "electra-accum-eval": dict(
        model={"family": "electra", "embedding_size": 16, "generator_fraction": 0.5},
        objectives=("mlm", "rtd"),
        grad_accum=2,
        batch_size=4,
        eval_every=4,
        eval_batches=3,
    ),
    "albert-sso-lamb": dict(
        model={"family": "albert", "embedding_size": 16, "share": "all"},
        objectives=("mlm", "sso"),
        optim={"name": "lamb"},
    ),
    "bert-nsp-sbo-span": dict(
        objectives=("mlm", "nsp", "sbo"), masking=MaskingSettings(kind="span"), grad_accum=2
    ),
    "roberta-two-phases": dict(model={"family": "roberta", "pre_ln": True}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_resuming_from_a_checkpoint_is_bit_identical(
    case, shards_dir, nsp_shards, sso_shards, tmp_path
) -> None:
    settings = dict(CASES[case])
    data = {"albert-sso-lamb": sso_shards, "bert-nsp-sbo-span": nsp_shards}.get(case, shards_dir)
    if case == "electra-accum-eval":
        settings["eval_data"] = str(shards_dir)
    if case == "roberta-two-phases":
        settings["phase2"] = Phase2Config(str(shards_dir), start_step=5, batch_size=4)
    config = tiny_config(**settings)
    whole = tmp_path / "whole"
    train(config, data, whole, progress=False)

    # What a kill -9 after step 4's checkpoint leaves behind: that checkpoint, and a log
    # and a half-written checkpoint from later steps.
    broken = tmp_path / "broken"
    broken.mkdir()
    shutil.copytree(whole / "step-0000004", broken / "step-0000004")
    shutil.copy(whole / "metrics.jsonl", broken / "metrics.jsonl")
    shutil.copy(whole / "config.json", broken / "config.json")
    (broken / ".step-0000008.tmp").mkdir()
    (broken / ".step-0000008.tmp" / "model.safetensors").write_bytes(b"partial")
    train(config, data, broken, resume=True, progress=False)

    a, b = weights(whole, 8), weights(broken, 8)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert logged(whole) == logged(broken)
    if case == "electra-accum-eval":
        evaluated = [r for r in logged(whole) if "eval_mlm_accuracy" in r]
        assert [r["step"] for r in evaluated] == [4, 8]
        assert all(0 <= r["eval_rtd_accuracy"] <= 1 for r in evaluated)


def concat(batches: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """One batch holding the given batches' rows, padded to the longest."""
    length = max(b["input_ids"].shape[1] for b in batches)
    fill = {"labels": -100}
    out = {}
    for key in batches[0]:
        parts = []
        for b in batches:
            t = b[key]
            if t.ndim == 2:
                t = torch.nn.functional.pad(t, (0, length - t.shape[1]), value=fill.get(key, 0))
            parts.append(t)
        out[key] = torch.cat(parts)
    return out


def test_accumulation_gives_the_gradient_of_one_big_batch(nsp_shards, tmp_path) -> None:
    # Every objective is normalized by its count over the whole step, so two micro-batches
    # of 4 give the update of the one batch of 8 that holds them.
    common = dict(
        model={"dropout": 0.0, "attention_dropout": 0.0},
        objectives=("mlm", "nsp", "sbo"),
        masking=MaskingSettings(kind="span"),
        max_steps=4,
    )
    accum = _Run(
        tiny_config(**common, batch_size=4, grad_accum=2), nsp_shards, tmp_path / "a", Dist()
    )
    big = _Run(tiny_config(**common), nsp_shards, tmp_path / "b", Dist())
    # Plain SGD: Adam divides by the root of tiny second moments, which turns the float
    # rounding of differently ordered sums into visible differences; SGD shows the gradient.
    for run in (accum, big):
        run.optimizer = torch.optim.SGD(run.model.parameters(), lr=0.5)
        run.scheduler = torch.optim.lr_scheduler.ConstantLR(run.optimizer, factor=1.0)
    loader = iter(accum._loader(0))
    for _ in range(3):
        micro = [next(loader), next(loader)]
        accum._step([prepare(b, unpad=True) for b in micro])
        big._step([prepare(concat(micro), unpad=True)])
    a, b = accum.model.state_dict(), big.model.state_dict()
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-6, rtol=1e-5), name


def test_non_finite_steps_are_skipped_then_stop_the_run(shards_dir, tmp_path) -> None:
    # A step size of 1e30 overflows every weight: from the second step on the loss is NaN.
    config = tiny_config(optim={"lr": 1e30, "warmup_steps": 0, "grad_clip": 0.0}, max_steps=20)
    # Step 1 is finite, steps 2-6 are not (their updates skipped): the log line after them
    # (every 2 steps) stops the run.
    with pytest.raises(ClozeError, match="not finite for 5 steps in a row by step 6"):
        train(config, shards_dir, tmp_path / "run", progress=False)


def test_a_session_that_only_skips_commits_nothing(shards_dir, tmp_path) -> None:
    # lr 1e30: step 1 is finite and leaves weights of about 1e30; every step after is NaN.
    config = tiny_config(optim={"lr": 1e30, "warmup_steps": 0, "grad_clip": 0.0}, max_steps=1)
    config = replace(config, save_every=1)
    train(config, shards_dir, tmp_path / "run", progress=False)
    more = replace(config, max_steps=3, log_every=10)  # below the streak's 5
    with pytest.raises(ClozeError, match=r"none of the 1 step\(s\) since step 1 had a finite"):
        train(more, shards_dir, tmp_path / "run", progress=False, resume=True)
    assert sorted(p.name for p in (tmp_path / "run").glob("step-*")) == ["step-0000001"]


def test_weights_that_are_not_finite_are_refused_on_resume_and_export(
    shards_dir, tmp_path, capsys
) -> None:
    from clozeworks.cli import main

    # lr 1e39 is past float32: step 1's update turns the weights to infinities.
    config = tiny_config(optim={"lr": 1e39, "warmup_steps": 0, "grad_clip": 0.0}, max_steps=1)
    train(replace(config, save_every=1), shards_dir, tmp_path / "run", progress=False)
    more = replace(config, max_steps=3, save_every=1)
    with pytest.raises(ClozeError, match=r"step 1 of .*: weights are not finite"):
        train(more, shards_dir, tmp_path / "run", progress=False, resume=True)
    out = tmp_path / "hf"
    assert main(["export", "--run", str(tmp_path / "run"), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "step-0000001: weights are not finite" in err, err
    assert not out.exists()


def test_tensorboard_gets_the_logged_scalars(shards_dir, tmp_path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from clozeworks.trainer.tracking import tensorboard_tag

    config = replace(tiny_config(max_steps=4), report_to=("tensorboard",))
    train(config, shards_dir, tmp_path / "run", progress=False)
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    steps = [e.step for e in events.Scalars("train/mlm_loss")]
    assert steps == [2, 4]
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/lr", "train/tokens_per_s", "train/mlm_accuracy"} <= tags
    # Held-out figures in a group of their own (eval/...), none left ungrouped.
    assert all(t.startswith(("train/", "eval/")) for t in tags)
    assert tensorboard_tag("eval_mlm_loss") == "eval/mlm_loss"


def test_tensorboard_after_a_resume_has_each_step_once(shards_dir, tmp_path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tmp_path / "run"
    config = replace(tiny_config(max_steps=8), report_to=("tensorboard",))
    train(config, shards_dir, run, progress=False)
    # As if killed after logging step 8 but before its checkpoint was committed: the
    # resume starts from step 4 and logs steps 6 and 8 a second time.
    shutil.rmtree(run / "step-0000008")
    # TensorBoard reads event files in name order: the second, then the pid, then a counter
    # of this process's writers compared as text ("10" before "9"). A resume is a new
    # process; resumed in this one within the same second, the order could turn.
    time.sleep(1.01 - time.time() % 1)
    train(config, shards_dir, run, resume=True, progress=False)
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    scalars = events.Scalars("train/mlm_loss")
    assert [e.step for e in scalars] == [2, 4, 6, 8]
    losses = {r["step"]: r["mlm_loss"] for r in logged(run)}
    assert [e.value for e in scalars] == pytest.approx([losses[s] for s in (2, 4, 6, 8)])
    # The resume is recorded for the report to mark; a fresh run into the directory forgets.
    assert read_resumes(run) == [4]
    train(config, shards_dir, run, progress=False, overwrite=True)
    assert read_resumes(run) == []


def test_a_rank_without_a_gpu_of_its_own_is_refused(monkeypatch) -> None:
    """Two processes on a one-GPU machine: the second would ask for cuda:1."""
    from clozeworks.schemas.errors import UsageError
    from clozeworks.trainer.distributed import setup

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(UsageError, match=r"local rank 1 has no GPU of its own \(1 visible\)"):
        setup("auto")


def test_deterministic_kernels_are_on_for_the_run_only(shards_dir, tmp_path) -> None:
    seen = []
    original = _Run.train

    def spy(self, *args, **kwargs):
        seen.append(torch.are_deterministic_algorithms_enabled())
        return original(self, *args, **kwargs)

    config = replace(tiny_config(), deterministic=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Run, "train", spy)
        train(config, shards_dir, tmp_path / "run", progress=False)
    assert seen == [True]
    assert not torch.are_deterministic_algorithms_enabled()


def test_a_resume_with_other_model_settings_is_one_error_not_skipped_steps(
    shards_dir, tmp_path, capsys
) -> None:
    config = tiny_config(max_steps=2, save_every=1, optim={"warmup_steps": 0})
    train(config, shards_dir, tmp_path / "run", progress=False)
    wider = replace(config, max_steps=4, model=replace(config.model, intermediate_size=96))
    with pytest.raises(BadInputError, match=r"step-0000002: the model configured does not fit"):
        train(wider, shards_dir, tmp_path / "run", progress=False, resume=True)
    assert "skipping" not in capsys.readouterr().err
