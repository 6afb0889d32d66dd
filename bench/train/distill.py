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

STUDENT = (
    "[model]\nhidden_size = 64\nnum_layers = 2\nnum_heads = 2\nintermediate_size = 256\n"
    "[optim]\nlr = 1e-3\n"
)


def _train(demo: Path, out: Path, steps: int, *extra: str) -> dict[str, float]:
    config = out.parent / "student.toml"
    config.write_text(STUDENT, encoding="utf-8")
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--demo", type=Path, default=Path("demo-out"), help="make demo's output")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--out", type=Path, default=Path("bench/out/distill"))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    teacher = ["--teacher", str(args.demo / "run")]
    half = args.steps // 2
    runs = {
        "alone (mlm)": _train(args.demo, args.out / "alone", args.steps),
        "DistilBERT (mlm,kd)": _train(
            args.demo, args.out / "kd", args.steps, *teacher, "--objective", "mlm,kd"
        ),
        "mlm,kd,att,hid": _train(
            args.demo, args.out / "all", args.steps, *teacher, "--objective", "mlm,kd,att,hid"
        ),
    }
    # TinyBERT's general distillation: half the steps on the layers, half on the soft
    # targets at temperature 1, from the first stage.
    first = _train(args.demo, args.out / "layers", half, *teacher, "--objective", "att,hid")
    runs["TinyBERT (att,hid; kd)"] = _train(
        args.demo, args.out / "tinybert", args.steps - half, *teacher, "--objective", "kd",
        "--temperature", "1", "--init-from", str(args.out / "layers"),
    )  # fmt: skip
    runs["TinyBERT (att,hid; kd)"]["sequences_per_s"] = first["sequences_per_s"]
    folders = dict(zip(runs, ("alone", "kd", "all", "tinybert"), strict=True))
    probes = {name: _probe(args.out / folders[name], args.out, False) for name in runs}
    random = [_probe(args.out / "alone", args.out, True, seed) for seed in range(3)]
    load = os.getloadavg()[0]
    print(f"student H64 L2 A2, {args.steps} steps, batch 32, load average {load:.2f}")
    print("| student | held-out MLM loss | accuracy | probe dev acc | seq/s | peak RSS |")
    print("|---|---|---|---|---|---|")
    for name, r in runs.items():
        print(
            f"| {name} | {r['eval_mlm_loss']:.3f} | {100 * r['eval_mlm_accuracy']:.1f}% | "
            f"{probes[name]:.1f}% | {r['sequences_per_s']:.0f} | {r['peak_rss_mb']:.0f} MB |"
        )
    spread = statistics.stdev(random)
    print(f"| random weights (3 seeds) | | | {statistics.mean(random):.1f}% +- {spread:.1f} | | |")
    plain = runs["alone (mlm)"]["sequences_per_s"]
    for name, r in list(runs.items())[1:]:
        print(f"{name} step / plain step: {plain / max(r['sequences_per_s'], 1e-9):.2f}x the time")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
