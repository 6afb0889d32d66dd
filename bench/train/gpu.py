"""Training throughput and model FLOPs utilization (MFU) on a GPU.

Our model with its real training step (bf16 autocast, fused AdamW, clipping) and, for
comparison on the same batches, Hugging Face `BertForPreTraining` (sdpa attention, bf16
autocast, fused AdamW). FLOPs per token follow the PaLM paper's count (appendix B):
6 x (non-embedding parameters) + 12 x layers x hidden x length, for the forward and
backward passes; the MLM decoder adds 6 x hidden x vocab per predicted token for us and
per token for transformers, which computes logits everywhere. MFU is achieved FLOP/s over
the GPU's peak bf16 dense FLOP/s (`--peak-tflops`, or a table of common GPUs).

    python -m bench.train.gpu                     # bert-base, length 128, batch 64
    python -m bench.train.gpu --preset bert-large --seq-len 512 --batch 16 --compile
Prints "no GPU" and exits 0 when CUDA is not available.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

# Dense bf16 tensor-core peaks (TFLOP/s) from the vendors' data sheets.
PEAK_TFLOPS = {"H100": 989.0, "A100": 312.0, "L4": 121.0, "A10": 125.0, "L40": 181.0, "T4": 65.0}


def peak_tflops(name: str) -> float | None:
    for key, value in PEAK_TFLOPS.items():
        if key in name:
            return value
    return None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--preset", default="bert-base")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--compile", action="store_true", help="torch.compile our encoder")
    p.add_argument("--peak-tflops", type=float, help="the GPU's peak bf16 TFLOP/s")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("no GPU: nothing measured (bench/train/run.py compares step times on the CPU)")
        return 0

    import transformers

    from bench.train.run import batches, hf_groups
    from clozeworks.trainer.config import MODEL_PRESETS, TrainConfig
    from clozeworks.trainer.export import to_transformers
    from clozeworks.trainer.models import build_model
    from clozeworks.trainer.optim import build_optimizer

    device = torch.device("cuda")
    name = torch.cuda.get_device_name(device)
    peak = args.peak_tflops or peak_tflops(name)
    model_config, _ = MODEL_PRESETS[args.preset]
    model_config = type(model_config)(**{**model_config.__dict__, "vocab_size": args.vocab})
    config = TrainConfig(model=model_config, objectives=("mlm", "nsp"))
    ours = build_model(config)
    ((_, exported),) = to_transformers(ours, config)
    hf = transformers.BertForPreTraining._from_config(exported.config, attn_implementation="sdpa")
    hf.load_state_dict(exported.state_dict())
    ours, hf = ours.to(device).train(), hf.to(device).train()
    if args.compile:
        ours.encoder.compile()
    cpu_batches = batches(4, args.batch, args.seq_len, args.vocab)
    data = [{k: v.to(device) for k, v in b.items()} for b in cpu_batches]
    predicted = float(sum((b["labels"] != -100).sum() for b in data)) / len(data)
    tokens = args.batch * args.seq_len
    m = model_config
    body = sum(p.numel() for p in ours.encoder.layers.parameters())  # non-embedding
    attention = 12 * m.num_layers * m.hidden_size * args.seq_len
    decoder = 6 * m.hidden_size * args.vocab

    def run(model, optimizer, hf_model: bool) -> float:
        def step(batch):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(**batch).loss if hf_model else model(batch)["loss"]
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        for b in data:
            step(b)  # warm-up (and compilation)
        torch.cuda.synchronize()
        started = time.perf_counter()
        for i in range(args.steps):
            step(data[i % len(data)])
        torch.cuda.synchronize()
        return (time.perf_counter() - started) / args.steps

    results = {
        "clozeworks": (run(ours, build_optimizer(ours, config.optim, device), False), predicted),
        "transformers": (
            run(hf, torch.optim.AdamW(hf_groups(hf), lr=1e-4, eps=1e-6, fused=True), True),
            float(tokens),
        ),
    }
    print(f"{name}: {args.preset}, length {args.seq_len}, batch {args.batch}, bf16 autocast")
    print(f"{'model':<14}{'ms/step':>10}{'tokens/s':>12}{'TFLOP/s':>10}{'MFU':>8}")
    for label, (seconds, decoded) in results.items():
        flops = tokens * (6 * body + attention) + decoded * decoder
        tflops = flops / seconds / 1e12
        mfu = f"{tflops / peak:.1%}" if peak else "n/a"
        print(f"{label:<14}{seconds * 1000:>10.1f}{tokens / seconds:>12.0f}{tflops:>10.1f}{mfu:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
