"""`cloze shard` throughput against HF `datasets` + `group_texts` and the tokenizer ceiling.

    python bench/shard/run.py --mb 50             # throughput table (ratios from one run)
    python bench/shard/run.py --mb 1000 --only full-sentences nsp --skip-peers   # peak RSS

Makes its own corpus: the standard library's docstrings, repeated with their sentences
rotated until the corpus has --mb megabytes of text, written as a document store (Parquet +
stats.json). A WordPiece vocabulary (30522) is trained on the first 5 MB. Then, over the
same text:

- ceiling: `Tokenizer.encode_batch_fast` alone, 1,000 documents per call;
- hf:      `datasets` map(tokenize, batched) + map(group_texts, batched), as
           transformers' examples/pytorch/language-modeling/run_mlm.py does it (one process,
           its default), block size = --max-seq-len;
- cloze:   `cloze shard --mode M` on Beam's DirectRunner (one worker unless --workers),
           in a subprocess whose peak RSS is measured.

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
from itertools import chain
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from corpus.demo_corpus import iter_docstrings  # noqa: E402
from corpus.sentences import split_sentences  # noqa: E402
from corpus.vocab import VocabConfig, load_tokenizer, save_tokenizer, train_tokenizer  # noqa: E402
from schemas.documents import DOCUMENT  # noqa: E402

DOCS_PER_PART = 20_000


def make_corpus(work: Path, megabytes: float) -> tuple[Path, int, int]:
    """Docstrings, each copy with its sentences rotated by the copy number."""
    base = [d["text"] for d in iter_docstrings()]
    split = [split_sentences(t) for t in base]
    docs_dir = work / "docs"
    docs_dir.mkdir(parents=True)
    target = int(megabytes * 1e6)
    total = count = part = 0
    rows: list[dict[str, str]] = []
    copy = 0
    while total < target:
        for i, sentences in enumerate(split):
            k = copy % max(1, len(sentences))
            text = " ".join(sentences[k:] + sentences[:k]) if copy else base[i]
            rows.append({"id": f"c{copy}:{i}", "text": text, "source": "bench", "meta": "{}"})
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
        copy += 1
    (docs_dir / "stats.json").write_text(json.dumps({"documents_out": count, "bytes_out": total}))
    return docs_dir, count, total


def make_tokenizer(work: Path, docs_dir: Path) -> Path:
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


def ceiling(tokenizer: Path, texts: list[str]) -> tuple[float, int]:
    tok = load_tokenizer(tokenizer).tokenizer
    start = time.perf_counter()
    tokens = 0
    for i in range(0, len(texts), 1000):
        for e in tok.encode_batch_fast(texts[i : i + 1000], add_special_tokens=False):
            tokens += len(e.ids)
    return time.perf_counter() - start, tokens


def hf_group_texts(tokenizer: Path, docs_dir: Path, block: int, cache: Path) -> tuple[float, int]:
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
    return time.perf_counter() - start, len(grouped)


def cloze_shard(
    mode: str, docs_dir: Path, tokenizer: Path, out: Path, max_len: int, workers: int
) -> tuple[float, int, float]:
    cmd = [
        sys.executable, "-m", "cloze", "shard", "--input", str(docs_dir),
        "--tokenizer", str(tokenizer), "--output", str(out), "--mode", mode,
        "--max-seq-len", str(max_len),
    ]  # fmt: skip
    if workers > 1:
        cmd += [
            "--direct_num_workers", str(workers), "--direct_running_mode", "multi_processing"
        ]  # fmt: skip
    timed = ["/usr/bin/time", "-f", "%M", *cmd]
    start = time.perf_counter()
    done = subprocess.run(timed, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"cloze shard failed:\n{done.stderr[-3000:]}")
    rss_kb = float(done.stderr.strip().splitlines()[-1])
    manifest = json.loads((out / "manifest.json").read_text())
    return seconds, manifest["totals"]["sequences"], rss_kb / 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--mb", type=float, default=50.0, help="megabytes of text")
    p.add_argument("--max-seq-len", type=int, default=128)
    p.add_argument("--only", nargs="+", default=["full-sentences", "nsp"])
    p.add_argument("--workers", type=int, default=1, help="DirectRunner workers for cloze")
    p.add_argument("--skip-peers", action="store_true", help="cloze only (peak RSS runs)")
    p.add_argument("--work", type=Path, help="work directory (default: a temporary one)")
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-shard-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        docs_dir, docs, nbytes = make_corpus(work, args.mb)
        tokenizer = make_tokenizer(work, docs_dir)
        mb = nbytes / 1e6
        print(f"corpus: {docs} documents, {mb:.1f} MB of text; max length {args.max_seq_len}")
        print(f"machine: {os.cpu_count()} cores, shared with other work (one run, ratios)")
        rows = []
        base_s = hf_s = None
        if not args.skip_peers:
            texts = all_texts(docs_dir)
            base_s, _ = ceiling(tokenizer, texts)
            del texts
            rows.append(("encode_batch_fast alone", base_s, None, None))
            hf_s, hf_seqs = hf_group_texts(tokenizer, docs_dir, args.max_seq_len, work / "hf")
            rows.append(("HF datasets + group_texts", hf_s, hf_seqs, None))
        for mode in args.only:
            s, seqs, rss = cloze_shard(
                mode, docs_dir, tokenizer, work / f"shards-{mode}", args.max_seq_len, args.workers
            )
            rows.append((f"cloze shard {mode}", s, seqs, rss))
        print()
        head = ("s", "MB/s", "seq/s", "vs HF", "of ceil", "RSS GB")
        print(f"{'':28s} " + " ".join(f"{h:>8s}" for h in head))
        for name, s, seqs, rss in rows:
            line = f"{name:28s} {s:8.1f} {mb / s:8.2f}"
            line += f" {seqs / s:8.0f}" if seqs else f" {'':8s}"
            line += f" {hf_s / s:8.2f}" if hf_s and name.startswith("cloze") else f" {'':8s}"
            line += f" {base_s / s:8.0%}" if base_s else f" {'':8s}"
            line += f" {rss:8.2f}" if rss else ""
            print(line)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
