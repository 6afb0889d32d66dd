"""bench/inspect: `cloze inspect` on ~1 GB of shards vs `webdataset` just reading them.

    .venv/bin/python bench/inspect/run.py [--gb 1] [--mode full-sentences|nsp] [--premask]

Writes a synthetic shard set with corpus.shards.blocks (Zipf-distributed ids of a WordPiece
vocabulary trained on 20 MB of realistic documents (bench/corpus.py), lengths skewed
towards the maximum as in packed modes), warms the page cache, then times, interleaved,
best of --repeat:

- `wds raw`:    `webdataset.WebDataset(urls)` iterating every sample, no decoding;
- `wds decode`: the same with `.decode()` (every .npy member to an array);
- `inspect`:    `shard_summary` (every statistic of docs/inspect.md, every block decoded);
- `verify`:     `shard_summary(verify=True)` (the same plus every sha256).

It also runs the inspection in a fresh process on a quarter of the shards and on all of
them and prints each one's peak RSS: streaming means the two are about equal. The shards
are deleted at the end unless --keep. Ratios are from one run on one machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import webdataset as wds

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.corpus import realistic_texts
from clozeworks.corpus.inspect.shards import shard_summary
from clozeworks.corpus.shards.blocks import Block, ShardWriter, write_manifest
from clozeworks.corpus.vocab.train import (
    VocabConfig,
    copy_tokenizer_dir,
    load_tokenizer,
    save_tokenizer,
    train_tokenizer,
)
from clozeworks.schemas.manifest import Manifest, read_manifest, token_dtype_for
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.schemas.sidecars import TOKENIZER_DIR

BLOCK = 512


def make_tokenizer(directory: Path) -> None:
    config = VocabConfig(kind="wordpiece", vocab_size=30522)
    texts = realistic_texts(20)
    save_tokenizer(train_tokenizer(texts, config), config, directory)


def synthetic_block(
    rng: np.random.Generator, pool: np.ndarray, n: int, max_len: int, specials: dict, args
) -> Block:
    packed = rng.random(n) < 0.85
    lengths = np.where(packed, max_len, rng.integers(16, max_len, n)).astype(np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    start = int(rng.integers(0, len(pool) - offsets[-1]))
    tokens = pool[start : start + offsets[-1]].copy()
    tokens[offsets[:-1]] = specials["cls"]
    tokens[offsets[1:] - 1] = specials["sep"]
    block = Block(tokens=tokens, offsets=offsets)
    owner = np.repeat(np.arange(n), lengths)
    pos = np.arange(len(tokens)) - offsets[:-1][owner]
    if args.mode == "nsp":
        seg = (2 + (rng.random(n) * (lengths - 3)).astype(np.int64)).clip(2, lengths - 2)
        tokens[offsets[:-1] + seg - 1] = specials["sep"]
        block.segments = seg.astype(np.int16)
        block.labels = (rng.random(n) < 0.5).astype(np.int8)
    if args.premask:
        special = np.isin(tokens, list(specials.values()))
        chosen = np.flatnonzero(~special & (rng.random(len(tokens)) < 0.15))
        per_seq = np.bincount(owner[chosen], minlength=n)
        block.mlm_offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(per_seq, out=block.mlm_offsets[1:])
        block.mlm_positions = pos[chosen].astype(np.int16)
        block.mlm_labels = tokens[chosen].copy()
        u = rng.random(len(chosen))
        tokens[chosen[u < 0.8]] = specials["mask"]
        rnd = chosen[(u >= 0.8) & (u < 0.9)]
        tokens[rnd] = pool[rng.integers(0, len(pool), len(rnd))]
    return block


def write_set(out: Path, args) -> Manifest:
    make_tokenizer(out / "_tok")
    info = load_tokenizer(out / "_tok")
    rng = np.random.default_rng(0)
    v = info.vocab_size
    first = max(info.all_special_ids) + 1
    # Zipf-like ids: p(rank r) ~ 1/(r + 10), a pool sampled once and windowed per block.
    p = 1.0 / (np.arange(v - first) + 10.0)
    pool = (first + rng.choice(v - first, size=1 << 24, p=p / p.sum())).astype(token_dtype_for(v))
    dtype = token_dtype_for(v)
    # Whole blocks only and the same number per shard, as the manifest's size rule wants.
    block_bytes = BLOCK * args.max_len * np.dtype(dtype).itemsize
    blocks_per_shard = max(1, round(args.shard_mb * 1e6 / block_bytes))
    infos: list = []
    shards = 1  # known once the first shard's real size is
    while len(infos) < shards:
        with ShardWriter(out, len(infos), dtype) as w:
            for _ in range(blocks_per_shard):
                w.write(synthetic_block(rng, pool, BLOCK, args.max_len, info.special_ids, args))
            infos.append(w.close())
        shards = max(1, round(args.gb * 1e9 / infos[0].bytes))
    copy_tokenizer_dir(info, out / TOKENIZER_DIR)
    shutil.rmtree(out / "_tok")
    manifest = Manifest(
        mode=args.mode,
        max_seq_len=args.max_len,
        vocab_size=v,
        vocab_kind=info.kind,
        tokenizer_sha256=info.sha256,
        special_tokens=dict(info.special_ids),
        seed=0,
        shards=tuple(infos),
        block_size=BLOCK,
        token_dtype=dtype,
        premask=MaskingSettings() if args.premask else None,
        created_by="bench/inspect",
    )
    write_manifest(out, manifest)
    return manifest


def subset(src: Path, dst: Path, manifest: Manifest, count: int) -> None:
    dst.mkdir()
    for s in manifest.shards[:count]:
        (dst / s.name).symlink_to(src / s.name)
    (dst / TOKENIZER_DIR).symlink_to(src / TOKENIZER_DIR)
    write_manifest(dst, replace(manifest, shards=manifest.shards[:count]))


def wds_raw(urls: list[str]) -> int:
    return sum(1 for _ in wds.WebDataset(urls, shardshuffle=False))


def wds_decode(urls: list[str]) -> int:
    return sum(len(s["offsets.npy"]) - 1 for s in wds.WebDataset(urls, shardshuffle=False).decode())


def peak_rss_mb(directory: Path) -> tuple[float, int]:
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forked copy of this
    # (large) parent into the child, while VmHWM starts afresh at exec.
    code = (
        "import json, re, sys; from pathlib import Path; "
        "from corpus.inspect.shards import shard_summary; "
        "s = shard_summary(Path(sys.argv[1]), verify=True); "
        "kb = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1); "
        "print(json.dumps([int(kb), s['bytes']]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(directory)], capture_output=True, text=True, check=True
    )
    kb, size = json.loads(done.stdout)
    return kb / 1024, size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--shard-mb", type=float, default=64)
    ap.add_argument("--max-len", type=int, default=128)
    ap.add_argument("--mode", choices=["full-sentences", "nsp"], default="full-sentences")
    ap.add_argument("--premask", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", help="where to write the shards (default: a temp dir)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="bench-inspect-"))
    out = root / "shards"
    try:
        if not (out / ".manifest.json").is_file():
            out.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            write_set(out, args)
            print(f"wrote shards in {time.perf_counter() - started:.0f}s")
        manifest = read_manifest(out)
        urls = [str(out / s.name) for s in manifest.shards]
        for u in urls:  # warm the page cache: every contender reads from memory
            Path(u).read_bytes()
        print(
            f"{len(urls)} shards, {manifest.bytes / 1e9:.2f} GB, {manifest.sequences:,} "
            f"sequences, {manifest.tokens:,} tokens, mode {manifest.mode}"
            + (", pre-masked" if manifest.premask else "")
            + f", vocab {manifest.vocab_size}"
        )
        contenders: dict[str, Callable[[], object]] = {
            "wds raw": lambda: wds_raw(urls),
            "wds decode": lambda: wds_decode(urls),
            "inspect": lambda: shard_summary(out),
            "inspect --verify": lambda: shard_summary(out, verify=True),
        }
        # Wall time, and CPU time of this process (all its threads): on a machine whose
        # cores are shared with other jobs, CPU time is the steadier measure of the work.
        best = {name: float("inf") for name in contenders}
        cpu = {name: float("inf") for name in contenders}
        for _ in range(args.repeat):
            for name, fn in contenders.items():
                t, c = time.perf_counter(), time.process_time()
                fn()
                best[name] = min(best[name], time.perf_counter() - t)
                cpu[name] = min(cpu[name], time.process_time() - c)
        summary = shard_summary(out, verify=True)
        assert not summary["problems"], summary["problems"]
        assert summary["read"]["sequences"] == wds_decode(urls[:1]) * len(urls)
        print(
            f"\n{'':18} {'wall s':>7} {'GB/s':>6} {'vs wds raw':>11} {'vs wds decode':>14}"
            f" {'CPU s':>7} {'CPU vs raw':>11}"
        )
        for name, secs in best.items():
            print(
                f"{name:18} {secs:7.2f} {manifest.bytes / 1e9 / secs:6.2f} "
                f"{secs / best['wds raw']:10.2f}x {secs / best['wds decode']:13.2f}x"
                f" {cpu[name]:7.2f} {cpu[name] / cpu['wds raw']:10.2f}x"
            )
        quarter = root / "quarter"
        if not quarter.exists():
            subset(out, quarter, manifest, max(1, len(urls) // 4))
        q_mb, q_bytes = peak_rss_mb(quarter)
        f_mb, f_bytes = peak_rss_mb(out)
        print(
            f"\npeak RSS of `inspect --verify` in a fresh process: "
            f"{q_mb:.0f} MB on {q_bytes / 1e9:.2f} GB, {f_mb:.0f} MB on {f_bytes / 1e9:.2f} GB"
        )
        print("(one run; the machine is shared: other engineers' jobs run on its 2 cores)")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
