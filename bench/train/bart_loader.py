"""The loader with BART's noise against the same loader masking for MLM, at the same batch
and length, and fairseq's own noising code (`DenoisingDataset`, the copy the tests hold)
on the same rows.

The shards are `doc-sentences` rows of the demo's documents (real stdlib docstrings,
several KB a document). Every contender reads the same rows: the loader in this process
(no workers), `--batches` batches of `--batch-size`; fairseq noises the rows the MLM
loader's batches hold, one by one as its dataset does.

    cloze shard --input DEMO/docs --tokenizer DEMO/tokenizer --output SHARDS \\
        --mode doc-sentences --max-seq-len 128
    python -m bench.train.bart_loader --shards SHARDS
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from clozeworks.trainer.data.loader import ShardDataset


def _loader_rate(shards: Path, objective: str, batches: int, batch_size: int) -> float:
    ds = ShardDataset(shards, batch_size, seed=1, objectives=(objective,))
    loader = ds.loader()
    it = iter(loader)
    next(it)  # start-up (tables, first read) is not the steady rate
    start = time.perf_counter()
    for _ in range(batches):
        next(it)
    return batches * batch_size / (time.perf_counter() - start)


def _fairseq_rate(shards: Path, batches: int, batch_size: int) -> float:
    from clozeworks.trainer.data.objective_specs import FULL_STOP
    from clozeworks.trainer.data.source import checked_tokenizer, mask_tables
    from tests.trainer.data.fairseq_denoising import DenoisingDataset, Dictionary

    ds = ShardDataset(shards, batch_size, seed=1, objectives=("clm",))  # rows unmasked
    rows = []
    for batch in ds.loader():
        for ids, real in zip(batch["input_ids"], batch["attention_mask"].bool(), strict=True):
            rows.append(ids[real].clone())
        if len(rows) >= (batches + 1) * batch_size:
            break
    tables = mask_tables(ds.shards, None, None, True)
    checked = checked_tokenizer(ds.shards, None, None)
    assert checked is not None
    special = ds.manifest.special_tokens
    vocab = Dictionary(
        ds.manifest.vocab_size,
        special["cls"],
        special["sep"],
        checked.tokenizer.token_to_id(FULL_STOP),
    )
    reference = DenoisingDataset(
        rows, np.array([len(r) for r in rows]), vocab, special["mask"],
        tables.word_start.to(torch.uint8), shuffle=False, seed=1, mask=0.3, mask_random=0.1,
        insert=0.0, rotate=0.0, permute_sentences=1.0, bpe="gpt2", replace_length=1,
        mask_length="span-poisson", poisson_lambda=3.0,
    )  # fmt: skip
    count = batches * batch_size
    start = time.perf_counter()
    for i in range(batch_size, batch_size + count):
        reference[i]
    return count / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shards", type=Path, required=True, help="doc-sentences shards")
    p.add_argument("--batches", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=32)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    rates = {
        "MLM masking (loader)": _loader_rate(args.shards, "mlm", args.batches, args.batch_size),
        "BART noise (loader)": _loader_rate(args.shards, "bart", args.batches, args.batch_size),
        "fairseq DenoisingDataset (noise only)": _fairseq_rate(
            args.shards, args.batches, args.batch_size
        ),
    }
    load = os.getloadavg()[0]
    print(f"{args.batches} batches of {args.batch_size}, one thread, load average {load:.2f}")
    print("| contender | sequences/s | vs MLM loader |")
    print("|---|---|---|")
    mlm = rates["MLM masking (loader)"]
    for name, rate in rates.items():
        print(f"| {name} | {rate:,.0f} | {rate / mlm:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
