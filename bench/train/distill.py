"""Distillation against training the same student alone: held-out MLM loss, the downstream
probe, step time and peak memory.

The teacher is `make demo`'s run (bert-tiny, 2 layers of 128, 1,500 steps on the stdlib
docstrings); the student is 2 layers of 64 with the teacher's 2 heads, so it cannot start
from the teacher's layers and learns from its outputs: the soft targets (`mlm,kd`, the
hidden states being of another width), TinyBERT's layer losses with the soft targets
(`mlm,kd,att,hid`), and TinyBERT's two stages (`att,hid`, then `kd` at temperature 1 from
the first; half the steps each). Every student trains `--steps` steps on the demo's
shards with the same seed, batches and held-out split; each run is its own `cloze train`
process under GNU time for its peak RSS. The downstream probe is the demo's (which of 4
stdlib packages a docstring documents), fine-tuned from each student and, with three
seeds, from random weights of the student's shape.

    python -m bench.train.distill --demo demo-out --steps 600
    python -m bench.train.distill --demo demo-out --hidden 128 --ffn 256 --only alone,all --seeds 6
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any


def student(hidden: int, ffn: int | None = None) -> str:
    """2 layers of `hidden` with the teacher's 2 heads, FFN `ffn` (4 x hidden), lr 1e-3.
    A student of the teacher's every shape starts as a copy of its layers (DistilBERT's
    initialization); one shape apart, from random weights."""
    return (
        f"[model]\nhidden_size = {hidden}\nnum_layers = 2\nnum_heads = 2\n"
        f"intermediate_size = {ffn or 4 * hidden}\n[optim]\nlr = 1e-3\n"
    )


def _train(
    demo: Path, out: Path, steps: int, *extra: str, hidden: int = 64, ffn: int | None = None
) -> dict[str, float]:
    config = out.parent / "student.toml"
    config.write_text(student(hidden, ffn), encoding="utf-8")
    cloze = str(Path(sys.executable).parent / "cloze")
    args = [cloze, "train", "--data", str(demo / "shards")]
    args += ["--output", str(out), "--config", str(config), "--max-steps", str(steps)]
    args += ["--batch-size", "32", "--warmup", "0.1", "--eval-split", "0.05"]
    args += ["--eval-batches", "20", "--log-every", "25", "--no-progress", "--overwrite"]
    args += ["--report-to", "none", *extra]
    timed = subprocess.run(
        ["/usr/bin/time", "-v", *args], capture_output=True, text=True, check=True
    )
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", timed.stderr)
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    train_lines = [x for x in lines if "sequences_per_s" in x]
    evals = [x for x in lines if "eval_mlm_loss" in x]
    # The first window holds start-up work; the rest is the steady step.
    rate = sum(x["sequences_per_s"] for x in train_lines[1:]) / max(1, len(train_lines) - 1)
    return {
        "eval_mlm_loss": evals[-1]["eval_mlm_loss"],
        "eval_mlm_accuracy": evals[-1].get("eval_mlm_accuracy", float("nan")),
        "sequences_per_s": rate,
        "peak_rss_mb": int(peak[1]) / 1024 if peak else float("nan"),
    }


def _probe(run: Path, out: Path, random_init: bool, seed: int = 0) -> float:
    from clozeworks.commands.demo import PROBE_SETTINGS
    from clozeworks.corpus.text.probe import write_package_task
    from clozeworks.trainer.finetune.run import run_finetune
    from clozeworks.trainer.finetune.tasks import load_task

    data = out / "probe"
    write_package_task(data)
    spec = load_task(str(data / "task.toml"))
    target = out / (f"probe-random-{seed}" if random_init else f"probe-{run.name}")
    settings = replace(PROBE_SETTINGS, seed=seed)
    info = run_finetune(run, spec, data, target, settings, overwrite=True, random_init=random_init)
    return float(info["dev"]["accuracy"])


CONTENDERS = ("alone", "kd", "all", "tinybert")
NAMES = {
    "alone": "alone (mlm)",
    "kd": "DistilBERT (mlm,kd)",
    "all": "mlm,kd,att,hid",
    "tinybert": "TinyBERT (att,hid; kd)",
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--demo", type=Path, default=Path("demo-out"), help="make demo's output")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--hidden", type=int, default=64, help="the student's width")
    p.add_argument("--ffn", type=int, help="its feed-forward width (default 4 x hidden)")
    p.add_argument("--only", default=",".join(CONTENDERS), help="contenders, comma-separated")
    p.add_argument("--seeds", type=int, default=3, help="probe fine-tuning seeds each")
    p.add_argument("--out", type=Path, default=Path("bench/out/distill"))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    chosen = [c for c in CONTENDERS if c in args.only.split(",")]
    teacher = ["--teacher", str(args.demo / "run")]
    half, width = args.steps // 2, args.hidden
    size: dict[str, Any] = {"hidden": width, "ffn": args.ffn}
    made = {
        "alone": lambda: _train(args.demo, args.out / "alone", args.steps, **size),
        "kd": lambda: _train(
            args.demo, args.out / "kd", args.steps, *teacher, "--objective", "mlm,kd", hidden=width
        ),
        "all": lambda: _train(
            args.demo, args.out / "all", args.steps, *teacher, "--objective", "mlm,kd,att,hid",
            **size,
        ),
        "tinybert": lambda: _tinybert(args.demo, args.out, args.steps, half, teacher, size),
    }  # fmt: skip
    runs = {name: made[name]() for name in chosen}
    seeds = range(args.seeds)
    probes = {name: [_probe(args.out / name, args.out, False, s) for s in seeds] for name in runs}
    random = [_probe(args.out / chosen[0], args.out, True, seed) for seed in seeds]
    load = os.getloadavg()[0]
    print(
        f"student H{width} L2 A2 F{args.ffn or 4 * width}, {args.steps} steps, batch 32, "
        f"load average {load:.2f}"
    )
    print("| student | held-out MLM loss | accuracy | probe dev acc | seq/s | peak RSS |")
    print("|---|---|---|---|---|---|")
    for name, r in runs.items():
        print(
            f"| {NAMES[name]} | {r['eval_mlm_loss']:.3f} | {100 * r['eval_mlm_accuracy']:.1f}% | "
            f"{_spread(probes[name])} | {r['sequences_per_s']:.0f} | {r['peak_rss_mb']:.0f} MB |"
        )
    print(f"| random weights | | | {_spread(random)} | | |")
    print("probes by seed:", {NAMES[n]: [round(x, 1) for x in v] for n, v in probes.items()})
    print("random weights by seed:", [round(x, 1) for x in random])
    if "alone" in runs:
        plain = runs["alone"]["sequences_per_s"]
        for name, r in runs.items():
            if name != "alone":
                ratio = plain / max(r["sequences_per_s"], 1e-9)
                print(f"{NAMES[name]} step / plain step: {ratio:.2f}x the time")
    return 0


def _spread(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.1f}%"
    return f"{statistics.mean(values):.1f}% +- {statistics.stdev(values):.1f}"


def _tinybert(
    demo: Path, out: Path, steps: int, half: int, teacher: list[str], size: dict[str, Any]
) -> dict[str, float]:
    """TinyBERT's general distillation: half the steps on the layers, half on the soft
    targets at temperature 1, from the first stage."""
    first = _train(demo, out / "layers", half, *teacher, "--objective", "att,hid", **size)
    second = _train(
        demo, out / "tinybert", steps - half, *teacher, "--objective", "kd",
        "--temperature", "1", "--init-from", str(out / "layers"), **size,
    )  # fmt: skip
    second["sequences_per_s"] = first["sequences_per_s"]
    return second


if __name__ == "__main__":
    raise SystemExit(main())
