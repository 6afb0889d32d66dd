"""`cloze clean --filters c4,gopher` vs datatrove's C4 + Gopher filters on the same corpus.

    python bench/clean/run.py --mb 100            # throughput, both tools, agreement
    python bench/clean/run.py --mb 1024 --ours-only   # peak RSS of ours on >= 1 GB

Both run single-process (our DirectRunner in memory; datatrove one task), read the same
JSON lines and write their kept documents. Prints MB/s, peak RSS (of the child process) and
how often the two tools agree on keep/drop per document. The corpus is generated under
bench/out/ and deleted afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from bench.corpus import write_pages  # noqa: E402

DATATROVE = """
import sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.filters import C4QualityFilter, GopherQualityFilter, GopherRepetitionFilter
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter
src, out = sys.argv[1], sys.argv[2]
LocalPipelineExecutor(
    pipeline=[
        JsonlReader(src, compression=None),
        # TFDS C4's thresholds (datatrove defaults to the paper's prose: 5 sentences, 3 words)
        C4QualityFilter(min_num_sentences=3, min_words_per_line=5),
        GopherRepetitionFilter(),
        GopherQualityFilter(),
        JsonlWriter(out, compression=None),
    ],
    tasks=1, workers=1, logging_dir=out + "/logs",
).run()
"""


def run_child(cmd: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of one child process (its own rusage, via wait4)."""
    start = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"{cmd[:4]} failed with status {status}")
    return seconds, usage.ru_maxrss / 1024


def kept_ours(out: Path) -> set[str]:
    import pyarrow.parquet as pq

    ids: set[str] = set()
    for f in out.glob("part-*.parquet"):
        ids.update(pq.read_table(f, columns=["id"]).column("id").to_pylist())
    return ids


def kept_datatrove(out: Path) -> set[str]:
    ids: set[str] = set()
    for f in out.glob("*.jsonl"):
        with f.open() as lines:
            ids.update(json.loads(line)["id"] for line in lines)
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100)
    parser.add_argument("--ours-only", action="store_true")
    parser.add_argument("--filters", default="c4,gopher", help="our filters (RSS runs)")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--datatrove-python", default=str(ROOT / ".venv-bench/bin/python"))
    args = parser.parse_args()
    work = ROOT / "bench" / "out" / ("clean-rss" if args.ours_only else "clean")
    shutil.rmtree(work, ignore_errors=True)
    raw = work / "raw" / "pages.jsonl"
    docs = write_pages(raw, args.mb)
    size_mb = raw.stat().st_size / (1 << 20)
    print(f"corpus: {docs} documents, {size_mb:.0f} MB; {os.cpu_count()} cores, shared")
    cloze = [sys.executable, "-m", "clozeworks", "clean", "--input", str(raw), "--id-field", "id"]
    cloze += ["--output", str(work / "ours"), "--filters", args.filters]
    ours_s, ours_rss = run_child(cloze)
    stats = json.loads((work / "ours" / ".stats.json").read_text())
    rows = [("clozeworks", ours_s, ours_rss, stats["documents_out"])]
    agreement = None
    if not args.ours_only:
        dt_s, dt_rss = run_child(
            [args.datatrove_python, "-c", DATATROVE, str(raw.parent), str(work / "datatrove")]
        )
        dt_kept = kept_datatrove(work / "datatrove")
        rows.append(("datatrove", dt_s, dt_rss, len(dt_kept)))
        ours_kept = kept_ours(work / "ours")
        agreement = 1 - len(ours_kept ^ dt_kept) / docs
    print(f"{'tool':<12}{'seconds':>9}{'MB/s':>8}{'peak RSS MB':>13}{'kept':>8}")
    for name, seconds, rss, kept in rows:
        print(f"{name:<12}{seconds:>9.1f}{size_mb / seconds:>8.2f}{rss:>13.0f}{kept:>8}")
    if len(rows) == 2:
        print(f"throughput ratio clozeworks/datatrove: {rows[1][1] / rows[0][1]:.2f}x")
        print(f"same keep/drop decision on {agreement:.1%} of documents")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
