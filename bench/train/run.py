"""Training step time: our BERT vs Hugging Face `BertForPreTraining` (sdpa attention).

Identical batches and configuration: bert-small (L4/H512/A8), length 128, batch 32, BERT's
vocabulary size (30522), MLM (15%, 80/10/10, our masking) + NSP, dropout 0.1, AdamW with
BERT's groups, clipping at 1.0, on the CPU. A step is forward, backward, clip, optimizer step.
Rounds alternate between the two models so that machine noise hits both alike; the table
shows medians.

    python -m bench.train.run                # the issue's configuration (from the repository root)
    python -m bench.train.run --profile       # where the time goes (torch.profiler)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import transformers

from clozeworks.corpus.shards.counter_rng import sequence_keys
from clozeworks.corpus.shards.masking import MaskTables, mask_tokens
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.config import TrainConfig
from clozeworks.trainer.families import build_model, to_transformers
from clozeworks.trainer.optim import build_optimizer
from clozeworks.trainer.presets import MODEL_PRESETS


def batches(n: int, batch: int, length: int, vocab: int) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    tables = MaskTables.build(vocab, [0, 1, 2, 3, 4], None, 4)
    out = []
    for i in range(n):
        ids = torch.randint(5, vocab, (batch, length), generator=g)
        ids[:, 0], ids[:, length // 2], ids[:, -1] = 2, 3, 3  # [CLS] A [SEP] B [SEP]
        attention = torch.ones_like(ids, dtype=torch.bool)
        keys = sequence_keys(0, 0, torch.arange(i * batch, (i + 1) * batch))
        masked = mask_tokens(ids, attention, keys, tables, MaskingSettings())
        out.append(
            {
                "input_ids": masked.input_ids,
                "attention_mask": attention.long(),
                "token_type_ids": (torch.arange(length) > length // 2).long().expand(batch, -1),
                "labels": masked.labels,
                "next_sentence_label": torch.randint(0, 2, (batch,), generator=g),
            }
        )
    return out


def hf_groups(model: torch.nn.Module) -> list[dict[str, object]]:
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if "LayerNorm" in name or name.endswith("bias") else decay).append(p)
    return [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]


def stepper(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    hf: bool = False,
    call: Callable | None = None,
) -> Callable:
    """One training step on a batch; `call(model, batch) -> loss` when the model takes the
    batch otherwise than as keywords (hf) or as our dict."""

    def loss_of(m: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return m(**batch).loss if hf else m(batch)["loss"]

    compute = call or loss_of

    def step(batch: dict[str, torch.Tensor]) -> float:
        loss = compute(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())

    return step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--preset", default="bert-small", choices=list(MODEL_PRESETS))
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=3, help="steps per model per round")
    p.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    model_config = MODEL_PRESETS[args.preset]
    model_config = type(model_config)(**{**model_config.__dict__, "vocab_size": args.vocab})
    config = TrainConfig(model=model_config, objectives=("mlm", "nsp"))
    ours = build_model(config).train()
    ((_, exported),) = to_transformers(ours, config)  # the same initial weights
    hf = transformers.BertForPreTraining._from_config(exported.config, attn_implementation="sdpa")
    hf.load_state_dict(exported.state_dict())
    hf.train()
    assert hf.config._attn_implementation == "sdpa"
    device = torch.device("cpu")
    steps = {
        "clozeworks": stepper(ours, build_optimizer(ours, config.optim, device), hf=False),
        "transformers": stepper(hf, torch.optim.AdamW(hf_groups(hf), lr=1e-4, eps=1e-6), True),
    }
    data = batches(args.steps, args.batch, args.seq_len, args.vocab)
    tokens = args.batch * args.seq_len

    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        for name, step in steps.items():
            step(data[0])
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for batch in data[:2]:
                    step(batch)
            print(f"== {name}")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))
        return

    for step in steps.values():
        step(data[0])  # warm-up: allocator, kernels, lazy optimizer state
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            for batch in data:
                started = time.perf_counter()
                step(batch)
                times[name].append(time.perf_counter() - started)

    print(
        f"{args.preset}, length {args.seq_len}, batch {args.batch}, vocab {args.vocab}, "
        f"CPU threads {torch.get_num_threads()}, {args.rounds} rounds x {args.steps} steps"
    )
    print(f"{'model':<14}{'ms/step':>10}{'tokens/s':>12}")
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, median in medians.items():
        print(f"{name:<14}{median * 1000:>10.0f}{tokens / median:>12.0f}")
    print(f"speed-up: {medians['transformers'] / medians['clozeworks']:.2f}x")


if __name__ == "__main__":
    main()
