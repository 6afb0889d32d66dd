"""`cloze shard` throughput against HF `datasets` + `group_texts` and the tokenizer ceiling.

    python bench/shard/run.py --mb 40              # throughput tables (ratios from one run)
    python bench/shard/run.py --mb 1000 --only full-sentences nsp --skip-peers   # peak RSS

Makes its own corpus: realistic documents of several KB (bench/scale/corpus.py: Python's
reST docs, Debian copyright files, man pages; `apt-get install python3.11-doc`) until it
has --mb megabytes of text, written as a document store (Parquet + stats.json). A
WordPiece vocabulary (30522, uncased: the default) is trained on the first 5 MB. Then,
over the same text, each contender in a fresh Python process of its own:

- ceiling: `Tokenizer.encode_batch_fast` alone, 1,000 documents per call, ids read back;
- chosen:  the encoder `cloze shard` uses (corpus/vocab/fast.py) alone, the same way; "of
           ceil" in the tables is against this one;
- sentences: the floor of a sentence-aware builder: split into sentences and encode
           keeping the boundaries (`corpus.shards.tokenize.DocumentEncoder`), nothing else;
- hf:      `datasets` load_dataset + map(tokenize, batched) + map(group_texts, batched), as
           transformers' examples/pytorch/language-modeling/run_mlm.py does it (one process,
           its default), block size = --max-seq-len, on an empty cache;
- cloze:   `cloze shard --mode M` (`clozeworks.cli.main`) on Beam's DirectRunner (one worker
           unless --workers).

Two figures per contender, two tables: "work" is timed inside the process after its
imports (tokenizer loaded for the peers; cloze's includes loading the tokenizer, building
and running the pipeline, writing the shards and the manifest); "process" is the whole
subprocess as the parent sees it: interpreter start, imports, work, exit. Peak RSS is the
process's (`/usr/bin/time`).

Needs `pip install -r bench/requirements.txt` (datasets). The work directory is deleted
at the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import chain
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

# Each contender's process imports only what it uses: project modules are imported inside
# the functions below.

DOCS_PER_PART = 20_000


def make_corpus(work: Path, megabytes: float) -> tuple[Path, int, int]:
    """Realistic documents (bench/scale/corpus.py: paragraphs of Python's reST docs, Debian
    copyright files and man pages, several KB each) as a document store."""
    from bench.scale.corpus import documents
    from clozeworks.schemas.documents import DOCUMENT

    docs_dir = work / "docs"
    docs_dir.mkdir(parents=True)
    target = int(megabytes * 1e6)
    total = count = part = 0
    rows: list[dict[str, str]] = []
    for text in documents(0):
        rows.append({"id": f"doc-{count:09d}", "text": text, "source": "bench", "meta": "{}"})
        total += len(text.encode())
        count += 1
        if len(rows) == DOCS_PER_PART or total >= target:
            pq.write_table(
                pa.Table.from_pylist(rows, schema=DOCUMENT),
                docs_dir / f"part-{part:05d}-of-99999.parquet",
            )
            part += 1
            rows = []
        if total >= target:
            break
    (docs_dir / ".stats.json").write_text(json.dumps({"documents_out": count, "bytes_out": total}))
    return docs_dir, count, total


def make_tokenizer(work: Path, docs_dir: Path) -> Path:
    from clozeworks.corpus.vocab.train import VocabConfig, save_tokenizer, train_tokenizer

    texts, size = [], 0
    for f in sorted(docs_dir.glob("part-*.parquet")):
        for t in pq.read_table(f).column("text").to_pylist():
            texts.append(t)
            size += len(t)
            if size > 5e6:
                break
        if size > 5e6:
            break
    config = VocabConfig(kind="wordpiece", vocab_size=30522)
    out = work / "tokenizer"
    save_tokenizer(train_tokenizer(texts, config), config, out)
    return out


def all_texts(docs_dir: Path) -> list[str]:
    return [
        t
        for f in sorted(docs_dir.glob("part-*.parquet"))
        for t in pq.read_table(f).column("text").to_pylist()
    ]


def timed_batches(texts: list[str], count: Callable[[list[str]], int]) -> dict[str, float]:
    """Seconds to pass `texts` to `count` 1,000 at a time, and the tokens it counted."""
    start = time.perf_counter()
    tokens = sum(count(texts[i : i + 1000]) for i in range(0, len(texts), 1000))
    return {"seconds": time.perf_counter() - start, "tokens": tokens}


def ceiling(tokenizer: Path, docs_dir: Path) -> dict[str, float]:
    from clozeworks.corpus.vocab.train import load_tokenizer

    tok = load_tokenizer(tokenizer).tokenizer

    def count(batch: list[str]) -> int:
        return sum(len(e.ids) for e in tok.encode_batch_fast(batch, add_special_tokens=False))

    return timed_batches(all_texts(docs_dir), count)


def chosen(tokenizer: Path, docs_dir: Path) -> dict[str, float]:
    """The encoder `cloze shard` uses (corpus/vocab/fast.py), alone, on whole documents."""
    from clozeworks.corpus.vocab.fast import encoder_for
    from clozeworks.corpus.vocab.train import load_tokenizer

    encode = encoder_for(load_tokenizer(tokenizer).tokenizer)
    return timed_batches(all_texts(docs_dir), lambda batch: len(encode(batch)[0]))


def sentences_kept(tokenizer: Path, docs_dir: Path) -> dict[str, float]:
    """What any sentence-aware builder must do before packing: split every document into
    sentences and tokenize it keeping the boundaries (`DocumentEncoder`, as `cloze shard`)."""
    from clozeworks.corpus.shards.tokenize import DocumentEncoder
    from clozeworks.corpus.vocab.train import load_tokenizer

    encoder = DocumentEncoder(load_tokenizer(tokenizer).tokenizer)
    return timed_batches(all_texts(docs_dir), lambda batch: len(encoder.encode(batch).ids))


def hf_group_texts(tokenizer: Path, docs_dir: Path, block: int, cache: Path) -> dict[str, float]:
    import datasets
    from transformers import AutoTokenizer

    datasets.disable_progress_bars()
    tok = AutoTokenizer.from_pretrained(str(tokenizer))
    start = time.perf_counter()
    raw = datasets.load_dataset(
        "parquet",
        data_files=sorted(str(f) for f in docs_dir.glob("part-*.parquet")),
        split="train",
        cache_dir=str(cache),
    )

    def tokenize_function(examples):  # run_mlm.py, line_by_line=False
        return tok(examples["text"], return_special_tokens_mask=True)

    tokenized = raw.map(tokenize_function, batched=True, remove_columns=raw.column_names)

    def group_texts(examples):  # run_mlm.py's group_texts
        concatenated = {k: list(chain(*examples[k])) for k in examples}
        total = len(concatenated[next(iter(examples))])
        total = (total // block) * block
        return {
            k: [t[i : i + block] for i in range(0, total, block)] for k, t in concatenated.items()
        }

    grouped = tokenized.map(group_texts, batched=True)
    return {"seconds": time.perf_counter() - start, "sequences": len(grouped)}


def cloze_shard(argv: list[str]) -> dict[str, float]:
    from clozeworks.cli import command, main

    command("shard")  # the verb's imports, outside the timed work
    start = time.perf_counter()
    if main(argv) != 0:
        raise SystemExit(f"cloze {' '.join(argv)} failed")
    seconds = time.perf_counter() - start
    output = Path(argv[argv.index("--output") + 1])
    manifest = json.loads((output / ".manifest.json").read_text())
    return {"seconds": seconds, "sequences": manifest["totals"]["sequences"]}


def child(args: argparse.Namespace, rest: list[str]) -> None:
    """One contender, in this process; prints its result as one JSON line."""
    work = args.work
    if args.child == "ceiling":
        result = ceiling(work / "tokenizer", work / "docs")
    elif args.child == "chosen":
        result = chosen(work / "tokenizer", work / "docs")
    elif args.child == "sentences":
        result = sentences_kept(work / "tokenizer", work / "docs")
    elif args.child == "hf":
        result = hf_group_texts(work / "tokenizer", work / "docs", args.max_seq_len, work / "hf")
    else:
        result = cloze_shard(rest)
    print(json.dumps(result))


def run_child(args: argparse.Namespace, name: str, extra: list[str]) -> dict[str, float]:
    """Run `name` in a fresh process: its result, plus `process` (wall seconds of the
    whole process) and `rss_gb` (its peak RSS)."""
    cmd = [sys.executable, __file__, "--child", name, "--work", str(args.work)]
    cmd += ["--max-seq-len", str(args.max_seq_len), "--", *extra]
    start = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True, cwd=ROOT
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process"] = seconds
    result["rss_gb"] = float(done.stderr.strip().splitlines()[-1]) / 1e6
    return result


def cloze_argv(args: argparse.Namespace, mode: str) -> list[str]:
    argv = [
        "shard", "--input", str(args.work / "docs"), "--tokenizer", str(args.work / "tokenizer"),
        "--output", str(args.work / f"shards-{mode}"), "--mode", mode,
        "--max-seq-len", str(args.max_seq_len),
    ]  # fmt: skip
    if args.workers > 1:
        argv += [
            "--direct_num_workers", str(args.workers), "--direct_running_mode", "multi_processing"
        ]  # fmt: skip
    return argv


def print_table(title: str, rows: list[tuple[str, dict[str, float]]], key: str, mb: float) -> None:
    by_name = dict(rows)
    hf = by_name.get("HF datasets + group_texts", {}).get(key)
    ceil = by_name.get("chosen encoder alone", {}).get(key)
    print(f"\n{title}")
    head = ("s", "MB/s", "seq/s", "vs HF", "of ceil", "RSS GB")
    print(f"{'':28s} " + " ".join(f"{h:>8s}" for h in head))
    for name, r in rows:
        s = r[key]
        line = f"{name:28s} {s:8.1f} {mb / s:8.2f}"
        line += f" {r['sequences'] / s:8.0f}" if "sequences" in r else f" {'':8s}"
        line += f" {hf / s:8.2f}" if hf and not name.startswith("HF") else f" {'':8s}"
        line += f" {ceil / s:8.0%}" if ceil else f" {'':8s}"
        line += f" {r['rss_gb']:8.2f}"
        print(line)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--mb", type=float, default=50.0, help="megabytes of text")
    p.add_argument("--max-seq-len", type=int, default=128)
    p.add_argument("--only", nargs="+", default=["full-sentences", "nsp"])
    p.add_argument("--workers", type=int, default=1, help="DirectRunner workers for cloze")
    p.add_argument("--skip-peers", action="store_true", help="cloze only (peak RSS runs)")
    p.add_argument("--work", type=Path, help="work directory (default: a temporary one)")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args, rest = p.parse_known_args()
    if args.child:
        child(args, rest[1:] if rest[:1] == ["--"] else rest)
        return
    args.work = args.work or Path(tempfile.mkdtemp(prefix="bench-shard-"))
    args.work.mkdir(parents=True, exist_ok=True)
    try:
        docs_dir, docs, nbytes = make_corpus(args.work, args.mb)
        make_tokenizer(args.work, docs_dir)
        mb = nbytes / 1e6
        print(f"corpus: {docs} documents, {mb:.1f} MB of text; max length {args.max_seq_len}")
        print(f"machine: {os.cpu_count()} cores; load average at start {os.getloadavg()[0]:.2f}")
        rows: list[tuple[str, dict[str, float]]] = []
        if not args.skip_peers:
            rows.append(("encode_batch_fast alone", run_child(args, "ceiling", [])))
            rows.append(("chosen encoder alone", run_child(args, "chosen", [])))
            rows.append(("split + encode, sentences", run_child(args, "sentences", [])))
            shutil.rmtree(args.work / "hf", ignore_errors=True)  # an empty cache, every run
            rows.append(("HF datasets + group_texts", run_child(args, "hf", [])))
        for mode in args.only:
            rows.append((f"cloze shard {mode}", run_child(args, "cloze", cloze_argv(args, mode))))
        print(f"load average at end {os.getloadavg()[0]:.2f} (one run; ratios are what counts)")
        print_table("work (in-process, after imports)", rows, "seconds", mb)
        print_table("process (interpreter start + imports + work)", rows, "process", mb)
    finally:
        if not args.keep:
            shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
