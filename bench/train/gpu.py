"""Training throughput and model FLOPs utilization (MFU) on a GPU, from real shards.

Ours is the trainer's own step (`_Run._step`: host-side indices and unpadding, bf16
autocast, clipping, fused AdamW with the non-finite guard, the schedule) fed by the real
loader (`--workers` processes, pinned memory). Transformers' `BertForPreTraining` (sdpa
attention, bf16 autocast, fused AdamW, clipping) trains on the same batches. Three timings:

- `clozeworks`: our step with the loader running alongside, as in `cloze train`;
- `clozeworks, batches ready`: the same step on batches read beforehand, so the ratio of
  the two is the share of the step the GPU is busy with the real loader (goal >= 95%);
- `transformers`: its step on the batches read beforehand.

Tokens are real (non-padding) tokens, the same for every row. FLOPs per real token follow
the PaLM paper's count (appendix B): 6 x non-embedding parameters + 12 x layers x hidden x
mean row length, plus the MLM decoder's 6 x hidden x vocab per predicted token (we decode
predicted positions only, transformers every position: both are counted at the predicted
positions, the useful work). MFU is that over the GPU's peak bf16 dense FLOP/s.

    cloze shard --input DOCS --tokenizer TOK --output shards128 --mode nsp --max-seq-len 128
    python -m bench.train.gpu --data shards128 --batch 256
    python -m bench.train.gpu --data shards512 --batch 32 --compile
`--device cpu` runs the same code in fp32 on the CPU (a smoke run: no MFU).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

# Dense bf16 tensor-core peaks (TFLOP/s) from the vendors' data sheets.
PEAK_TFLOPS = {
    "H200": 989.0,
    "H100": 989.0,
    "A100": 312.0,
    "L4": 121.0,
    "A10": 125.0,
    "L40": 181.0,
    "T4": 65.0,
}


def peak_tflops(name: str) -> float | None:
    for key, value in PEAK_TFLOPS.items():
        if key in name:
            return value
    return None


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", required=True, help="a shard directory (cloze shard --mode nsp)")
    p.add_argument("--preset", default="bert-base")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=30, help="timed steps per contender")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (compilation)")
    p.add_argument("--workers", type=int, default=4, help="loader processes")
    p.add_argument("--compile", action="store_true", help="torch.compile our encoder")
    p.add_argument("--no-unpad", dest="unpad", action="store_false")
    p.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    p.add_argument("--peak-tflops", type=float, help="the GPU's peak bf16 TFLOP/s")
    p.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also profile N of our steps on ready batches (torch.profiler): the ops with the\n"
        "most host time and the most device time, and the step's host and device totals",
    )
    args = p.parse_args(argv)
    cuda = torch.cuda.is_available() and args.device != "cpu"
    if args.device == "cuda" and not cuda:
        print("no GPU: nothing measured (--device cpu runs the same code on the CPU)")
        return 0
    device = torch.device("cuda" if cuda else "cpu")

    import transformers

    from bench.train.run import hf_groups
    from clozeworks.trainer.batch_index import prepare, to_device
    from clozeworks.trainer.config import TrainConfig
    from clozeworks.trainer.distributed import setup
    from clozeworks.trainer.families import to_transformers
    from clozeworks.trainer.loop import _Run
    from clozeworks.trainer.presets import preset

    base = preset(args.preset)
    config: TrainConfig = replace(
        base,
        objectives=("mlm", "nsp"),
        batch_size=args.batch,
        max_steps=10**6,
        save_every=10**6,
        log_every=10**6,
        num_workers=args.workers,
        device=device.type,
        precision="bf16" if cuda else "fp32",
        compile=args.compile,
        unpad=args.unpad,
        report_to=(),
    )
    config = replace(config, optim=replace(config.optim, warmup_steps=0, warmup_ratio=None))
    with tempfile.TemporaryDirectory() as tmp:
        ours = _Run(config, Path(args.data), Path(tmp) / "run", setup(device.type))
        placed = next(ours.model.parameters()).device.type
        if placed != device.type:  # a bench that measured the CPU while asked for the GPU
            raise SystemExit(f"our model is on {placed}, not {device.type}")
        loader = iter(ours._loader(0))
        need = args.warmup + args.steps
        ready = [prepare(next(loader), config.unpad) for _ in range(need)]
        if cuda:
            ready = [{k: _pin(v) for k, v in b.items()} for b in ready]

        def ours_steps(batches: Any) -> float:
            for _ in range(args.warmup):
                ours._step([next(batches)])
            synchronize(device)
            started = time.perf_counter()
            for _ in range(args.steps):
                ours._step([next(batches)])
            synchronize(device)
            return (time.perf_counter() - started) / args.steps

        # The same initial weights for transformers, taken before our steps change them.
        ((_, exported),) = to_transformers(ours.model, ours.config)
        exported = exported.cpu()
        live = (prepare(b, config.unpad) for b in loader)
        results = {"clozeworks": ours_steps(live)}
        batches = iter(ready * 2)
        results["clozeworks, batches ready"] = ours_steps(batches)
        memory = {"clozeworks": _peak_memory(device)}
        if args.profile:
            _profile(lambda: ours._step([next(batches)]), args.profile, device)
        ours.optimizer.state.clear()  # off the GPU before transformers' peak is measured
        ours.model.cpu()
        if cuda:
            torch.cuda.empty_cache()

        hf = transformers.BertForPreTraining._from_config(
            exported.config, attn_implementation="sdpa"
        )
        hf.load_state_dict(exported.state_dict())
        hf = hf.to(device).train()
        fused = torch.optim.AdamW(hf_groups(hf), lr=1e-4, eps=1e-6, fused=True)
        hf_batches = [to_device(_hf_batch(b), device) for b in ready]
        results["transformers"] = _hf_steps(hf, fused, hf_batches, args, device, cuda)
        memory["transformers"] = _peak_memory(device)

    timed = ready[args.warmup :]
    tokens = sum(int(b["attention_mask"].sum()) for b in timed) / len(timed)
    predicted = sum(int((b["labels"] != -100).sum()) for b in timed) / len(timed)
    mean_length = tokens / args.batch
    m = config.model
    body = sum(p.numel() for p in ours.model.encoder.layers.parameters())  # non-embedding
    flops = tokens * (6 * body + 12 * m.num_layers * m.hidden_size * mean_length)
    flops += predicted * 6 * m.hidden_size * m.vocab_size
    name = torch.cuda.get_device_name(device) if cuda else "CPU"
    peak = args.peak_tflops or (peak_tflops(name) if cuda else None)
    width = int(timed[0]["input_ids"].shape[1])
    print(
        f"{name}: {args.preset}, {args.data}, batch {args.batch}, padded width <= {width}, "
        f"{mean_length:.1f} real tokens per row, {'bf16' if cuda else 'fp32'}, "
        f"compile {args.compile}, unpad {args.unpad}, {args.workers} loader workers"
    )
    print(f"{'':<28}{'ms/step':>9}{'tokens/s':>11}{'TFLOP/s':>9}{'MFU':>7}{'peak GiB':>10}")
    for label, seconds in results.items():
        tflops = flops / seconds / 1e12
        mfu = f"{tflops / peak:.1%}" if peak else "n/a"
        gib = memory.get(label, memory["clozeworks"])
        mem = f"{gib:.1f}" if gib is not None else "n/a"
        rate = tokens / seconds
        print(f"{label:<28}{seconds * 1e3:>9.1f}{rate:>11.0f}{tflops:>9.2f}{mfu:>7}{mem:>10}")
    busy = results["clozeworks, batches ready"] / results["clozeworks"]
    print(f"busy with the real loader: {busy:.1%} of the step (goal >= 95%)")
    print(f"ours / transformers tokens/s: {results['transformers'] / results['clozeworks']:.2f}x")
    return 0


def _profile(step: Any, steps: int, device: torch.device) -> None:
    """Where a step's time goes: is the host (Python, dispatch, launches) or the device the
    bound? A host-bound step shows host time per step near the step time and the device
    idle between kernels."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    synchronize(device)
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        synchronize(device)
    events = prof.key_averages()
    host = sum(e.self_cpu_time_total for e in events) / steps / 1e3
    print(f"profile of {steps} steps: host (self CPU) {host:.1f} ms per step")
    print(events.table(sort_by="self_cpu_time_total", row_limit=15))
    if device.type == "cuda":
        busy = sum(e.self_device_time_total for e in events) / steps / 1e3
        print(f"device (self CUDA) {busy:.1f} ms per step")
        print(events.table(sort_by="self_cuda_time_total", row_limit=15))


def _pin(value: Any) -> Any:
    return value.pin_memory() if isinstance(value, torch.Tensor) else value


def _hf_batch(batch: dict[str, Any]) -> dict[str, torch.Tensor]:
    keys = ("input_ids", "attention_mask", "token_type_ids", "labels", "next_sentence_label")
    return {k: batch[k] for k in keys}


def _hf_steps(
    model: Any,
    optimizer: Any,
    batches: list[dict[str, torch.Tensor]],
    args: Any,
    device: torch.device,
    cuda: bool,
) -> float:
    def step(batch: dict[str, torch.Tensor]) -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
            loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for b in batches[: args.warmup]:
        step(b)
    synchronize(device)
    started = time.perf_counter()
    for b in batches[args.warmup :]:
        step(b)
    synchronize(device)
    return (time.perf_counter() - started) / args.steps


def _peak_memory(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    peak = torch.cuda.max_memory_allocated(device) / 2**30
    torch.cuda.reset_peak_memory_stats(device)
    return peak


if __name__ == "__main__":
    sys.exit(main())
