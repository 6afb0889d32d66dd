"""bench/loader: the streaming loader vs Hugging Face's DataCollatorForLanguageModeling.

    .venv/bin/python bench/loader/run.py [--sequences 40000] [--lengths 128 512] [--reps 3]

Both sides get the same already-tokenized sequences, batch 64, token masking at 15%, one
CPU thread. Ours: read the shards + shuffle + collate + mask (`ShardDataset.loader()`,
in the calling process, and with one worker process). Peer: the collator alone, called on
python lists of ids (what `datasets` hands run_mlm.py), so it is not charged for reading.
Sequences are packed to full length from 10 MB of realistic documents (bench/corpus.py's
`realistic_texts`: Python's reST docs, Debian copyright files, man pages) with a WordPiece
vocabulary of 8000 trained on them. Each configuration runs `--reps` times, interleaved,
and the best time of each counts; the table prints ratios from this one run, by wall time
and by CPU time (this process plus the loader's worker: sequences per CPU second is
sequences per core). The wwm, span and ngram rows are ours with that masking, still against
HF's token collator.
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.corpus import realistic_texts
from clozeworks.corpus.shards.blocks import make_block, write_blocks, write_manifest
from clozeworks.corpus.vocab.train import VocabConfig, save_tokenizer, train_tokenizer
from clozeworks.schemas.manifest import Manifest
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.schemas.sidecars import TOKENIZER_DIR
from clozeworks.trainer.data.loader import ShardDataset

BATCH = 64


def build_tokenizer(root: Path) -> Path:
    texts = realistic_texts(10)
    config = VocabConfig(kind="wordpiece", vocab_size=8000)
    directory = root / "tokenizer"
    save_tokenizer(train_tokenizer(texts, config), config, directory)
    return directory


def packed_sequences(tokenizer_dir: Path, length: int, count: int) -> list[np.ndarray]:
    """`count` sequences of exactly `length` ids: [CLS] text... [SEP], text wrapping around."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    tok.no_truncation()
    texts = realistic_texts(10)
    stream = np.concatenate(
        [np.asarray(e.ids[1:-1], np.int64) for e in tok.encode_batch_fast(texts)]
    )
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    body = length - 2
    need = count * body
    reps = -(-need // len(stream))
    flat = np.tile(stream, reps)[:need].reshape(count, body)
    ends = np.full((count, 1), cls), np.full((count, 1), sep)
    return list(np.concatenate([ends[0], flat, ends[1]], 1))


def write_shards(directory: Path, tokenizer_dir: Path, seqs: list[np.ndarray], length: int):
    directory.mkdir(parents=True)
    shutil.copytree(tokenizer_dir, directory / TOKENIZER_DIR)
    block = 512
    shards = -(-len(seqs) // 4096)  # sizes must differ by at most one, as the builder deals
    infos = []
    for shard, indices in enumerate(np.array_split(np.arange(len(seqs)), shards)):
        part = [seqs[i] for i in indices]
        blocks = [make_block(part[i : i + block], "uint16") for i in range(0, len(part), block)]
        infos.append(write_blocks(directory, shard, "uint16", blocks))
    tok_sha = hashlib.sha256((tokenizer_dir / "tokenizer.json").read_bytes()).hexdigest()
    manifest = Manifest(
        mode="full-sentences",
        max_seq_len=length,
        vocab_size=8000,
        vocab_kind="wordpiece",
        tokenizer_sha256=tok_sha,
        special_tokens={"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4},
        seed=0,
        shards=tuple(infos),
        block_size=block,
    )
    write_manifest(directory, manifest)


def ours(shards: Path, workers: int, kind: str = "token") -> Callable[[], int]:
    ds = ShardDataset(shards, batch_size=BATCH, seed=0, masking=MaskingSettings(kind=kind))
    loader = ds.loader(num_workers=workers)

    def run() -> int:
        return sum(int(b["input_ids"].shape[0]) for b in loader)  # one epoch

    return run


def peer(tokenizer_dir: Path, seqs: list[np.ndarray]) -> Callable[[], int]:
    from transformers import DataCollatorForLanguageModeling, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(tokenizer_dir))
    collator = DataCollatorForLanguageModeling(tok, mlm_probability=0.15, pad_to_multiple_of=8)
    examples = [{"input_ids": s.tolist()} for s in seqs]
    usable = len(examples) // BATCH * BATCH

    def run() -> int:
        for i in range(0, usable, BATCH):
            batch = collator(examples[i : i + BATCH])
        assert batch["input_ids"].shape[0] == BATCH
        return usable

    return run


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the loader's workers, which
    exit at the end of each epoch)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def timed(fn: Callable[[], int]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) per sequence."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    n = fn()
    return (time.perf_counter() - wall) / n, (cpu_seconds() - cpu) / n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sequences", type=int, default=40000, help="at length 128; /4 at 512")
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--tensor-loops",
        action="store_true",
        help="span and n-gram masking by the tensor loops, as without numba (for before/after)",
    )
    args = parser.parse_args(argv)
    if args.tensor_loops:
        from clozeworks.corpus.shards import spans_compiled

        spans_compiled.AVAILABLE = False
    torch.set_num_threads(1)
    root = Path(tempfile.mkdtemp(prefix="bench-loader-"))
    try:
        tokenizer_dir = build_tokenizer(root)
        rows = []
        for length in args.lengths:
            count = args.sequences * 128 // length
            seqs = packed_sequences(tokenizer_dir, length, count)
            shards = root / f"shards-{length}"
            write_shards(shards, tokenizer_dir, seqs, length)
            cases = {
                "HF DataCollatorForLanguageModeling": peer(tokenizer_dir, seqs),
                "clozeworks loader, in process": ours(shards, 0),
                "clozeworks loader, 1 worker": ours(shards, 1),
                "clozeworks loader, in process, wwm": ours(shards, 0, "wwm"),
                "clozeworks loader, in process, span": ours(shards, 0, "span"),
                "clozeworks loader, in process, ngram": ours(shards, 0, "ngram"),
            }
            best: dict[str, tuple[float, float]] = {}
            for _ in range(args.reps):
                for name, fn in cases.items():
                    wall, cpu = timed(fn)
                    old = best.get(name, (float("inf"), float("inf")))
                    best[name] = (min(old[0], wall), min(old[1], cpu))
            base_wall, base_cpu = best["HF DataCollatorForLanguageModeling"]
            for name, (wall, cpu) in best.items():
                rows.append((length, name, 1 / wall, 1 / cpu, base_wall / wall, base_cpu / cpu))
        print(f"\nbatch {BATCH}, masking 15%, 1 thread; best of {args.reps} in one run")
        print("(a shared 2-core machine: compare ratios; CPU time is the steadier measure)\n")
        print(
            f"{'length':>6}  {'what':<38} {'seq/s wall':>11} {'seq/s/core':>11} "
            f"{'x wall':>7} {'x cpu':>6}"
        )
        for length, name, wall_rate, cpu_rate, x_wall, x_cpu in rows:
            print(
                f"{length:>6}  {name:<38} {wall_rate:>11,.0f} {cpu_rate:>11,.0f} "
                f"{x_wall:>6.1f}x {x_cpu:>5.1f}x"
            )
        print("\nseq/s/core: sequences per CPU second of this process and its loader workers.")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
