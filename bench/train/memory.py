"""Peak memory of training a preset with and without gradient checkpointing.

    python bench/train/memory.py --preset bert-large --batch-size 8 --seq-len 128 --steps 2

Each setting runs in its own process under GNU time -v (peak RSS of the whole process:
weights, AdamW state, gradients and activations), taking `--steps` real optimizer steps
of the trainer's own model, objectives and optimizer on random token batches (memory does
not depend on the tokens). On a GPU add `--device cuda` for torch's peak allocation too.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time


def one(args: argparse.Namespace) -> None:
    import torch

    from clozeworks.trainer.families import build_model
    from clozeworks.trainer.models.bert import Encoder
    from clozeworks.trainer.optim import build_optimizer
    from clozeworks.trainer.presets import preset

    device = torch.device(args.device)
    config = preset(args.preset)
    model = build_model(config).to(device).train()
    for m in model.modules():
        if isinstance(m, Encoder):
            m.checkpointing = args.checkpointing
    optimizer = build_optimizer(model, config.optim, device)
    g = torch.Generator().manual_seed(0)
    b, length, vocab = args.batch_size, args.seq_len, config.model.vocab_size
    ids = torch.randint(5, vocab, (b, length), generator=g)
    labels = torch.where(torch.rand(b, length, generator=g) < 0.15, ids, -100)
    batch = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "token_type_ids": torch.zeros_like(ids),
        "labels": labels,
    }
    batch = {k: v.to(device) for k, v in batch.items()}
    times = []
    for step in range(args.steps):
        start = time.perf_counter()
        out = model(batch, seed=step)
        out["loss"].backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    result = {"step_s": min(times), "loss": float(out["loss"])}
    if device.type == "cuda":
        result["cuda_peak_gb"] = torch.cuda.max_memory_allocated() / 1e9
    print(json.dumps(result))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="bert-large")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--checkpointing", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        one(args)
        return 0
    base = [sys.argv[0], "--one", "--preset", args.preset, "--device", args.device]
    base += ["--batch-size", str(args.batch_size), "--seq-len", str(args.seq_len)]
    base += ["--steps", str(args.steps)]
    print(f"{args.preset}, batch {args.batch_size} x {args.seq_len}, {args.device}")
    for on in (False, True):
        cmd = ["/usr/bin/time", "-v", sys.executable, *base, *(["--checkpointing"] if on else [])]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)[1])
        result = json.loads(done.stdout.strip().splitlines()[-1])
        extra = f", CUDA peak {result['cuda_peak_gb']:.2f} GB" if "cuda_peak_gb" in result else ""
        print(
            f"  checkpointing {'on ' if on else 'off'}: peak RSS {rss / 1e6:.2f} GB, "
            f"step {result['step_s']:.1f} s, loss {result['loss']:.3f}{extra}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
