"""Correctness on a GPU, through the command line as a user runs it:

1. bf16 tracks fp32: bert-mini trained `--steps` steps (300) from the same seed (so the
   same initial weights and batches) in both precisions; the mean MLM loss of the last
   quarter of the logged steps must agree within 2%.
2. kill -9, then `--resume`: a run killed (SIGKILL) after its first committed checkpoint
   and resumed ends at the weights of an uninterrupted run; the largest difference is
   printed (zero on the CPU; on a GPU, kernels that pick their reduction order at run time
   make it small but not zero unless deterministic algorithms are forced).
3. `cloze export` of the GPU-trained run loads in transformers and gives its logits.

    python -m bench.train.gpu_checks --data SHARDS             # on the GPU machine
    python -m bench.train.gpu_checks --data SHARDS --device cpu --steps 40   # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file


def cloze(*args: str) -> list[str]:
    return [sys.executable, "-m", "clozeworks", *args]


def train_args(data: str, run: Path, steps: int, device: str, *extra: str) -> list[str]:
    return cloze(
        "train", "--data", data, "--preset", "bert-mini", "--output", str(run),
        "--max-steps", str(steps), "--batch-size", "32", "--warmup", "0.1",
        "--log-every", "10", "--save-every", str(max(10, steps // 4)), "--device", device,
        "--no-progress", "--no-tensorboard", "--seed", "7", *extra,
    )  # fmt: skip


def last_quarter_loss(run: Path) -> float:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    tail = records[-max(1, len(records) // 4) :]
    return sum(r["mlm_loss"] for r in tail) / len(tail)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", required=True)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no GPU: nothing checked (--device cpu runs the same checks on the CPU)")
        return 0
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        losses = {}
        for precision in ("fp32", "bf16"):
            run = work / precision
            command = train_args(args.data, run, args.steps, args.device)
            subprocess.run([*command, "--precision", precision], check=True)
            losses[precision] = last_quarter_loss(run)
        gap = abs(losses["bf16"] - losses["fp32"]) / losses["fp32"]
        ok &= gap <= 0.02
        print(f"1. mlm loss, last quarter: fp32 {losses['fp32']:.4f}, bf16 {losses['bf16']:.4f}")
        print(f"   bf16 vs fp32: {gap:.2%} (at most 2%)")

        killed = work / "killed"
        again = [*train_args(args.data, killed, args.steps, args.device), "--precision", "fp32"]
        process = subprocess.Popen(again)
        while process.poll() is None and not list(killed.glob("step-*/COMMITTED")):
            time.sleep(0.2)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        committed = sorted(p.parent.name for p in killed.glob("step-*/COMMITTED"))
        subprocess.run([*again, "--resume"], check=True)
        final = f"step-{args.steps:07d}"
        a = load_file(work / "fp32" / final / "model.safetensors")
        b = load_file(killed / final / "model.safetensors")
        diff = max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
        ok &= diff <= (0.0 if args.device == "cpu" else 1e-3)
        print(f"2. killed with {committed} committed, resumed: max |weight difference| {diff:.3g}")

        export = work / "export"
        command = cloze("export", "--run", str(work / "bf16"), "--output", str(export))
        subprocess.run(command, check=True)
        import transformers

        model = transformers.AutoModelForMaskedLM.from_pretrained(export)
        ids = torch.tensor([[2, 100, 200, 300, 3]])
        logits = model(input_ids=ids).logits
        finite = bool(torch.isfinite(logits).all())
        ok &= finite
        name = type(model).__name__
        print(f"3. the bf16 run's export loads in transformers: {name}, finite logits {finite}")
    print("all checks passed" if ok else "a check FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
