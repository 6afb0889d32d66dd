"""Distillation helps (slow): on the same shards, steps, seed and held-out split, a
student of 2 layers of 64 that learns from a teacher's soft targets (`--objective mlm,kd`)
ends at a lower held-out MLM loss than the same student trained alone, and fine-tunes on
the demo's downstream probe better than the student's shape from random weights.
bench/train/distill.py measures the same at the demo's scale."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clozeworks.cli import main

pytestmark = pytest.mark.slow

TEACHER = (
    "[model]\nhidden_size = 128\nnum_layers = 2\nnum_heads = 2\nintermediate_size = 512\n"
    "[optim]\nlr = 1e-3\n"
)
STUDENT = (
    "[model]\nhidden_size = 64\nnum_layers = 2\nnum_heads = 2\nintermediate_size = 256\n"
    "[optim]\nlr = 1e-3\n"
)


def _train(shards: Path, out: Path, config: str, steps: int, *extra: str) -> dict:
    path = out.parent / f"{out.name}.toml"
    path.write_text(config, encoding="utf-8")
    args = ["train", "--data", str(shards), "--output", str(out), "--config", str(path)]
    args += ["--max-steps", str(steps), "--batch-size", "32", "--warmup", "0.1"]
    args += ["--eval-split", "0.1", "--eval-batches", "10", "--no-progress", *extra]
    assert main(args) == 0
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return [x for x in lines if "eval_mlm_loss" in x][-1]


def test_a_distilled_student_beats_the_same_student_alone(shards_dir, tmp_path) -> None:
    from clozeworks.commands.demo import PROBE_SETTINGS
    from clozeworks.corpus.text.probe import write_package_task
    from clozeworks.trainer.finetune.run import run_finetune
    from clozeworks.trainer.finetune.tasks import load_task

    teacher = tmp_path / "teacher"
    _train(shards_dir, teacher, TEACHER, 400)
    alone = _train(shards_dir, tmp_path / "alone", STUDENT, 300)
    taught = _train(shards_dir, tmp_path / "taught", STUDENT, 300, "--teacher", str(teacher),
                    "--objective", "mlm,kd")  # fmt: skip
    print(f"held-out MLM loss: alone {alone['eval_mlm_loss']:.3f}, "
          f"distilled {taught['eval_mlm_loss']:.3f}")  # fmt: skip
    assert taught["eval_mlm_loss"] < alone["eval_mlm_loss"], (alone, taught)

    data = tmp_path / "probe"
    write_package_task(data)
    spec = load_task(str(data / "task.toml"))
    scores = {
        name: run_finetune(tmp_path / "taught", spec, data, tmp_path / f"probe-{name}",
                           PROBE_SETTINGS, random_init=name == "random")["dev"]["accuracy"]
        for name in ("distilled", "random")
    }  # fmt: skip
    print(f"probe dev accuracy: {scores}")
    assert scores["distilled"] > scores["random"], scores
