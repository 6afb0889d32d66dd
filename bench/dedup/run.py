"""Near-dedup: `cloze dedup --near` vs datatrove's MinHash on the same planted corpus.

    python bench/dedup/run.py --originals 3000

The corpus has originals, a copy of each at word-5-gram Jaccard ~0.9 and a look-alike at
~0.5 (bench/corpus.py). Recall: share of (original, copy) pairs of which exactly one is
kept. False merges: share of look-alikes removed (they have no duplicate). Both tools run
single-process (our DirectRunner in memory; datatrove's four MinHash stages, one task each);
docs/s counts all documents over the wall time of the dedup alone.
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

from bench.corpus import write_planted  # noqa: E402

DATATROVE = """
import sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup import MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter,
)
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter
src, work = sys.argv[1], sys.argv[2]
config = MinhashConfig()  # 5-grams, 14 buckets x 8 hashes: datatrove's defaults
def run(steps, name, tasks=1):
    logs = f"{work}/logs/{name}"
    LocalPipelineExecutor(pipeline=steps, tasks=tasks, workers=1, logging_dir=logs).run()
reader = JsonlReader(src, compression=None)
run([reader, MinhashDedupSignature(f"{work}/sigs", config=config)], "sig")
# The bucket stage needs one task per bucket; workers=1 runs them one after another.
buckets = MinhashDedupBuckets(f"{work}/sigs", f"{work}/buckets", config=config)
run([buckets], "buckets", tasks=config.num_buckets)
run([MinhashDedupCluster(f"{work}/buckets", f"{work}/remove", config=config)], "cluster")
run([JsonlReader(src, compression=None), MinhashDedupFilter(f"{work}/remove"),
     JsonlWriter(f"{work}/out", compression=None)], "filter")
"""


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


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


def quality(kept: set[str], triples: list[tuple[str, str, str]]) -> tuple[float, float]:
    recall = sum((o in kept) != (c in kept) for o, c, _ in triples) / len(triples)
    false_merges = sum(alike not in kept for _, _, alike in triples) / len(triples)
    return recall, false_merges


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--originals", type=int, default=3000)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--datatrove-python", default=str(ROOT / ".venv-bench/bin/python"))
    args = parser.parse_args()
    work = ROOT / "bench" / "out" / "dedup"
    shutil.rmtree(work, ignore_errors=True)
    raw = work / "raw" / "planted.jsonl"
    triples = write_planted(raw, args.originals)
    docs = 3 * len(triples)
    print(
        f"corpus: {docs} documents ({raw.stat().st_size / 2**20:.0f} MB); "
        f"{os.cpu_count()} cores, shared with other jobs"
    )
    cloze = [sys.executable, "-m", "clozeworks"]
    subprocess.run(
        [*cloze, "clean", "--input", str(raw), "--output", str(work / "clean"), "--id-field", "id"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rows = []
    for name, extra in (
        ("clozeworks", []),
        ("clozeworks --verify", ["--verify", "--bands", "32", "--rows", "8"]),
    ):
        out = work / name.replace(" ", "")
        seconds = timed(
            [
                *cloze,
                "dedup",
                "--input",
                str(work / "clean"),
                "--output",
                str(out),
                "--near",
                *extra,
            ]
        )
        rows.append((name, seconds, *quality(kept_ours(out), triples)))
    seconds = timed([args.datatrove_python, "-c", DATATROVE, str(raw.parent), str(work / "dt")])
    rows.append(("datatrove", seconds, *quality(kept_datatrove(work / "dt" / "out"), triples)))
    print(f"{'tool':<22}{'seconds':>9}{'docs/s':>9}{'recall':>8}{'false merges':>14}")
    for name, seconds, recall, merges in rows:
        print(f"{name:<22}{seconds:>9.1f}{docs / seconds:>9.0f}{recall:>8.3f}{merges:>14.3f}")
    base = rows[-1][1]
    for name, seconds, *_ in rows[:-1]:
        print(f"throughput ratio {name}/datatrove: {base / seconds:.2f}x")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
