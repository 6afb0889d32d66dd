"""Distillation helps (slow, ~20 min on 2 cores): on the demo's shards, with the same
steps, seed, batches and held-out split, a student of 2 layers of 64 that learns from the
demo's teacher (bert-tiny after 1,500 steps) with mlm,kd,att,hid ends at a lower held-out
MLM loss than the same student trained alone, and fine-tunes on the demo's downstream
probe better than that student.

Measured (bench/train/distill.py, 600 steps, 2026-11-28): held-out MLM loss 5.726
distilled against 6.041 alone; probe dev accuracy with the demo's settings 53.0, 56.8,
50.2 distilled against 44.9, 43.9, 46.8 alone (fine-tuning seeds 0-2; the students are
the same runs each time). The test asks for every distilled seed above every seed of the
student alone. Against random weights of the student's shape (10 seeds: 48.8% +- 5.2)
the distilled student's lead is within one random seed's spread, so that is measured in
bench/README.md, not asserted.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from clozeworks.cli import main

pytestmark = pytest.mark.slow

STUDENT = (
    "[model]\nhidden_size = 64\nnum_layers = 2\nnum_heads = 2\nintermediate_size = 256\n"
    "[optim]\nlr = 1e-3\n"
)


def _train(demo: Path, out: Path, *extra: str) -> dict:
    path = out.parent / "student.toml"
    path.write_text(STUDENT, encoding="utf-8")
    args = ["train", "--data", str(demo / "shards"), "--output", str(out), "--config", str(path)]
    args += ["--max-steps", "600", "--batch-size", "32", "--warmup", "0.1"]
    args += ["--eval-split", "0.05", "--eval-batches", "20", "--no-progress", "--report-to"]
    assert main([*args, "none", *extra]) == 0
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return [x for x in lines if "eval_mlm_loss" in x][-1]


def test_a_distilled_student_beats_the_same_student_alone(tmp_path) -> None:
    from clozeworks.commands.demo import PROBE_SETTINGS
    from clozeworks.corpus.text.probe import write_package_task
    from clozeworks.trainer.finetune.run import run_finetune
    from clozeworks.trainer.finetune.tasks import load_task

    demo = tmp_path / "demo"
    assert main(["demo", "--output", str(demo), "--no-probe", "--no-progress"]) == 0
    alone = _train(demo, tmp_path / "alone")
    taught = _train(demo, tmp_path / "taught", "--teacher", str(demo / "run"),
                    "--objective", "mlm,kd,att,hid")  # fmt: skip
    print(f"held-out MLM loss: alone {alone['eval_mlm_loss']:.3f}, "
          f"distilled {taught['eval_mlm_loss']:.3f}")  # fmt: skip
    assert taught["eval_mlm_loss"] < alone["eval_mlm_loss"], (alone, taught)

    data = tmp_path / "probe"
    write_package_task(data)
    spec = load_task(str(data / "task.toml"))

    def probe(run: str, seed: int) -> float:
        out = tmp_path / f"probe-{run}-{seed}"
        settings = replace(PROBE_SETTINGS, seed=seed)
        info = run_finetune(tmp_path / run, spec, data, out, settings)
        return float(info["dev"]["accuracy"])

    distilled = [probe("taught", seed) for seed in range(3)]
    alone_probe = [probe("alone", seed) for seed in range(3)]
    print(f"probe dev accuracy: distilled {distilled}, alone {alone_probe}")
    assert min(distilled) > max(alone_probe), (distilled, alone_probe)
