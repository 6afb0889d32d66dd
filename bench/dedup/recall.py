"""Near-dedup recall on real documents with planted edits: `cloze dedup --near` vs datatrove.

    .venv/bin/python bench/dedup/recall.py --docs 100000 --copies 30000

The corpus: `--docs` real documents (3 to 10 paragraphs each from Python's reST docs, Debian
copyright files and man pages, bench/scale/corpus.py; the pool keeps one paragraph of at
most 3 KB per opening six words, see `paragraph_pool`), and `--copies` edited copies of
some of them, 5-10% of the words changed: half scattered (single words replaced by words
of the corpus), half in spans (runs of 2-20 words replaced, deleted, or new words
inserted). Every pair's true Jaccard similarity of
word 5-gram sets (clozeworks' shingles: lower-cased `\\w+` words) is computed exactly.

Reported per tool: recall by true-Jaccard band (a pair is found when at most one of its two
documents is kept), the share of untouched documents (those without a planted copy)
removed, and documents/s and MB/s over the dedup's wall time with its peak RSS (GNU time).
Our documents are written straight to a document store (Parquet + .stats.json) so no clean
stage runs; datatrove reads the same documents as JSON lines, its four MinHash stages one
task each, like ours on one worker.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench.dedup.run import DATATROVE, kept_datatrove, kept_ours  # noqa: E402
from bench.scale.corpus import paragraphs  # noqa: E402
from clozeworks.corpus.dedup.minhash import Shingler, jaccard  # noqa: E402
from clozeworks.schemas import DOCUMENT, STATS_FILE  # noqa: E402

BANDS = ((0.9, 1.01), (0.8, 0.9), (0.7, 0.8), (0.6, 0.7), (0.0, 0.6))
_MAXRSS = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")


def paragraph_pool() -> list[str]:
    """The sources' paragraphs of at most 3,000 bytes, one per opening. Licence texts and
    man page boilerplate come in many near-identical variants ("This program is free
    software; ..."), and a man page whose roff left no blank line is one paragraph of
    10,000 words: documents sharing either would be near-duplicates that no edit of ours
    planted, and "untouched documents removed" would count true duplicates."""
    pool: dict[str, str] = {}
    for text in sorted(set(paragraphs())):
        if len(text.encode("utf-8")) <= 3000:
            pool.setdefault(" ".join(text.lower().split()[:6]), text)
    return sorted(pool.values())


def base_documents(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pool = paragraph_pool()
    docs = []
    for _ in range(count):
        parts = rng.sample(pool, rng.randint(3, 10))
        docs.append("\n\n".join(parts))
    return docs


def edit(rng: random.Random, text: str, vocab: list[str]) -> tuple[str, str]:
    """(copy, how): 5-10% of the words changed, scattered or in spans."""
    words = text.split(" ")
    budget = max(1, round(len(words) * rng.uniform(0.05, 0.10)))
    if rng.random() < 0.5:
        for i in rng.sample(range(len(words)), min(budget, len(words))):
            words[i] = rng.choice(vocab)
        return " ".join(words), "scattered"
    while budget > 0:
        size = min(budget, rng.randint(2, 20))
        budget -= size
        at = rng.randrange(len(words))
        kind = rng.random()
        if kind < 0.5:  # replace a run
            words[at : at + size] = [rng.choice(vocab) for _ in range(size)]
        elif kind < 0.75 and len(words) > size + 10:  # delete a run
            del words[at : at + size]
        else:  # insert a run
            words[at:at] = [rng.choice(vocab) for _ in range(size)]
    return " ".join(words), "spans"


def build(
    work: Path, docs: int, copies: int, seed: int
) -> tuple[list[tuple[str, str, float]], set[str], int]:
    """Writes the store and the JSON lines; returns (original, copy, Jaccard) triples, the
    untouched ids and the text bytes."""
    rng = random.Random(seed + 1)
    texts = base_documents(docs, seed)
    vocab = sorted({w for t in texts[:2000] for w in t.split() if w.isalpha()})
    records = [(f"d{i:07d}", t) for i, t in enumerate(texts)]
    chosen = rng.sample(range(docs), copies)
    shingler = Shingler(5)
    pairs = []
    for n, i in enumerate(chosen):
        copy, _ = edit(rng, texts[i], vocab)
        copy_id = f"e{n:07d}"
        records.append((copy_id, copy))
        pairs.append((records[i][0], copy_id, jaccard(shingler(texts[i]), shingler(copy))))
    rng.shuffle(records)
    touched = {records_id for records_id, _, _ in pairs}
    untouched = {f"d{i:07d}" for i in range(docs)} - touched
    store = work / "docs"
    store.mkdir(parents=True)
    size = sum(len(t.encode("utf-8")) for _, t in records)
    per_part = 20_000
    parts = (len(records) + per_part - 1) // per_part
    for p in range(parts):
        chunk = records[p * per_part : (p + 1) * per_part]
        table = pa.table(
            {
                "id": [r[0] for r in chunk],
                "text": [r[1] for r in chunk],
                "source": ["planted"] * len(chunk),
                "meta": ["{}"] * len(chunk),
            },
            schema=DOCUMENT,
        )
        pq.write_table(table, store / f"part-{p:05d}-of-{parts:05d}.parquet")
    stats = {
        "documents_in": len(records),
        "documents_out": len(records),
        "bytes_in": size,
        "bytes_out": size,
    }
    (store / STATS_FILE).write_text(json.dumps(stats))
    jsonl = work / "raw" / "docs.jsonl"
    jsonl.parent.mkdir()
    with jsonl.open("w", encoding="utf-8") as f:
        for doc_id, text in records:
            f.write(json.dumps({"id": doc_id, "text": text}) + "\n")
    return pairs, untouched, size


def timed(cmd: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of one command under GNU time."""
    start = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-v", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{done.stderr[-3000:]}")
    match = _MAXRSS.search(done.stderr)
    return seconds, int(match.group(1)) / 1024 if match else float("nan")


def quality(
    kept: set[str], pairs: list[tuple[str, str, float]], untouched: set[str]
) -> list[float]:
    row = []
    for lo, hi in BANDS:
        band = [(a, b) for a, b, j in pairs if lo <= j < hi]
        found = sum(not (a in kept and b in kept) for a, b in band)
        row.append(found / len(band) if band else float("nan"))
    row.append(sum(d not in kept for d in untouched) / len(untouched))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--copies", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--ours",
        nargs="+",
        default=[
            "--threshold 0.7",
            "--threshold 0.7 --no-verify",
            "--threshold 0.8",
            "--no-verify",
        ],
        help="flag sets for `cloze dedup --near`, one contender each",
    )
    parser.add_argument("--no-datatrove", action="store_true")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--datatrove-python", default=str(ROOT / ".venv-bench/bin/python"))
    args = parser.parse_args()
    work = ROOT / "bench" / "out" / "recall"
    shutil.rmtree(work, ignore_errors=True)
    pairs, untouched, size = build(work, args.docs, args.copies, args.seed)
    total = args.docs + args.copies
    counts = [sum(lo <= j < hi for _, _, j in pairs) for lo, hi in BANDS]
    print(
        f"corpus: {total} documents, {size / 1e6:.0f} MB of text; planted pairs by true "
        f"Jaccard: "
        + ", ".join(
            f"[{lo}, {min(hi, 1.0)}): {n}" for (lo, hi), n in zip(BANDS, counts, strict=True)
        )
    )
    print(f"load average before: {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores")
    rows = []
    for flags in args.ours:
        out = work / ("ours" + re.sub(r"\W+", "_", flags))
        cmd = [
            sys.executable,
            "-m",
            "clozeworks",
            "dedup",
            "--input",
            str(work / "docs"),
            "--output",
            str(out),
            "--near",
            *flags.split(),
        ]
        seconds, rss = timed(cmd)
        rows.append(
            (f"clozeworks {flags}", seconds, rss, quality(kept_ours(out), pairs, untouched))
        )
        shutil.rmtree(out)
    if not args.no_datatrove:
        dt = work / "dt"
        seconds, rss = timed([args.datatrove_python, "-c", DATATROVE, str(work / "raw"), str(dt)])
        rows.append(
            (
                "datatrove defaults",
                seconds,
                rss,
                quality(kept_datatrove(dt / "out"), pairs, untouched),
            )
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    head = " | ".join(f"J [{lo}, {min(hi, 1.0)})" for lo, hi in BANDS)
    print(f"| tool | {head} | untouched removed | s | docs/s | MB/s | peak RSS MB |")
    print("|---" * (len(BANDS) + 6) + "|")
    for name, seconds, rss, q in rows:
        cells = " | ".join(f"{v:.3f}" for v in q[:-1])
        print(
            f"| {name} | {cells} | {q[-1]:.2%} | {seconds:.0f} | {total / seconds:.0f} | "
            f"{size / 1e6 / seconds:.2f} | {rss:.0f} |"
        )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
