"""Training step time of GPT, T5 and XLNet: ours vs transformers' own classes, on the CPU.

`GPT2LMHeadModel` (sdpa attention), `T5ForConditionalGeneration` and `XLNetLMHeadModel`,
each at our small preset (gpt2-small, t5-small, xlnet-base: XLNet has no smaller one),
loaded with our initial weights through `cloze export`'s code, fed the same batches: rows
of Python's reST documentation (`python3.11-doc`) tokenized with a real vocabulary,
[CLS] ... [SEP] as packed shards hold them, made into each objective's targets by our
loader code (T5 with 100 sentinels on top of the vocabulary, XLNet's permutation with its
n-gram selection of a sixth). A step is forward, backward, clipping at 1.0 and a fused
AdamW step for both. Rounds alternate between the two models so machine noise hits both
alike; the table shows medians.

    python -m bench.train.generative --tokenizer bench/out/scale/2gb/tokenizer
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import transformers

from bench.train.run import stepper
from clozeworks.corpus.shards.counter_rng import sequence_keys
from clozeworks.corpus.shards.masking import MaskTables
from clozeworks.corpus.vocab.files import load_tokenizer
from clozeworks.trainer.batch_index import prepare
from clozeworks.trainer.data.permutation import PermutationTargets
from clozeworks.trainer.data.targets import CausalTargets, SpanCorruption
from clozeworks.trainer.families import build_model, to_transformers
from clozeworks.trainer.models.xlnet import permutation_masks
from clozeworks.trainer.optim import build_optimizer
from clozeworks.trainer.presets import preset

SOURCES = Path("/usr/share/doc/python3.11/html/_sources")
SENTINELS = 100


def rows(tokenizer: Path, n: int, length: int) -> tuple[torch.Tensor, Any]:
    info = load_tokenizer(tokenizer)
    cls, sep = info.special_ids["cls"], info.special_ids["sep"]
    stream: list[int] = []
    body = length - 2
    for path in sorted(SOURCES.glob("**/*.rst.txt")):
        text = path.read_text(errors="replace")
        stream += info.tokenizer.encode(text, add_special_tokens=False).ids
        if len(stream) >= n * body:
            break
    chunks = [[cls, *stream[i * body : (i + 1) * body], sep] for i in range(n)]
    return torch.tensor(chunks), info


def batches(name: str, ids: torch.Tensor, info: Any, batch: int) -> list[dict[str, torch.Tensor]]:
    out = []
    vocab = info.vocab_size
    for lo in range(0, len(ids), batch):
        part = ids[lo : lo + batch]
        b = {
            "input_ids": part.clone(),
            "attention_mask": torch.ones_like(part),
            "token_type_ids": torch.zeros_like(part),
        }
        keys = sequence_keys(0, 0, torch.arange(lo, lo + len(part)))
        if name == "gpt2-small":
            CausalTargets()(b)
        elif name == "t5-small":
            sentinels = torch.arange(vocab + SENTINELS - 1, vocab - 1, -1)
            SpanCorruption(sentinels, info.special_ids["sep"], info.special_ids["pad"])(b, keys)
            b.pop("noise_stats")
        else:
            special = [*info.special_ids.values()]
            tables = MaskTables.build(
                vocab, special, info.word_start_table(), info.special_ids["mask"]
            )
            PermutationTargets(tables, preset(name).masking)(b, keys)
            b.pop("plm_stats")
        out.append(b)
    return out


def hf_inputs(name: str, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    ids, mask = batch["input_ids"], batch["attention_mask"]
    if name == "gpt2-small":
        return {"input_ids": ids, "attention_mask": mask, "labels": ids}
    if name == "t5-small":
        return {"input_ids": ids, "attention_mask": mask, "labels": batch["labels"]}
    perm, mapping, _ = permutation_masks(batch)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": batch["token_type_ids"],
        "perm_mask": perm.float(),
        "target_mapping": mapping.float(),
        "labels": batch["labels"],
    }


def compare(
    name: str, ids: torch.Tensor, info: Any, args: argparse.Namespace
) -> tuple[float, float]:
    config = preset(name)
    vocab = info.vocab_size + (SENTINELS if name == "t5-small" else 0)
    config = replace(config, model=replace(config.model, vocab_size=vocab))
    ours = build_model(config).train()
    ((_, exported),) = to_transformers(ours, config, info.special_ids)
    cls = type(exported)
    kwargs = {"attn_implementation": "sdpa"} if name == "gpt2-small" else {}
    hf = cls._from_config(exported.config, **kwargs)
    if name == "t5-small":  # untied output layer, as the export keeps it
        hf.lm_head.weight = torch.nn.Parameter(hf.lm_head.weight.detach().clone())
    hf.load_state_dict(exported.state_dict())
    hf.train()
    data = batches(name, ids, info, args.batch)
    hosted = [prepare(b, unpad=True) for b in data]
    device = torch.device("cpu")
    steps = {
        "clozeworks": stepper(ours, build_optimizer(ours, config.optim, device)),
        "transformers": stepper(
            hf,
            torch.optim.AdamW(hf.parameters(), lr=1e-4, fused=True),
            call=lambda m, b: m(**hf_inputs(name, b)).loss,
        ),
    }
    feeds = {"clozeworks": hosted, "transformers": data}
    for key, step in steps.items():
        step(feeds[key][0])  # warm-up: allocator, lazy optimizer state
    times: dict[str, list[float]] = {key: [] for key in steps}
    for _ in range(args.rounds):
        for key, step in steps.items():
            for batch in feeds[key]:
                started = time.perf_counter()
                step(batch)
                times[key].append(time.perf_counter() - started)
    return statistics.median(times["clozeworks"]), statistics.median(times["transformers"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tokenizer", type=Path, default=Path("bench/out/scale/2gb/tokenizer"))
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--batches", type=int, default=2, help="distinct batches per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    p.add_argument("--only", choices=["gpt2-small", "t5-small", "xlnet-base"], action="append")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    ids, info = rows(args.tokenizer, args.batch * args.batches, args.seq_len)
    print(
        f"length {args.seq_len}, batch {args.batch}, vocab {info.vocab_size}, CPU threads "
        f"{torch.get_num_threads()}, {args.rounds} rounds x {args.batches} steps, "
        f"transformers {transformers.__version__}, load {os.getloadavg()[0]:.2f}"
    )
    print(f"{'preset':<12}{'ours ms':>10}{'theirs ms':>11}{'speed-up':>10}")
    for name in args.only or ["gpt2-small", "t5-small", "xlnet-base"]:
        ours, theirs = compare(name, ids, info, args)
        print(f"{name:<12}{ours * 1000:>10.0f}{theirs * 1000:>11.0f}{theirs / ours:>9.2f}x")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
