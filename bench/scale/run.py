"""Peak memory, throughput and temporary disk of every stage as the corpus grows.

    .venv/bin/python bench/scale/run.py --gb 0.5 1 2            # every stage, three sizes
    .venv/bin/python bench/scale/run.py --gb 0.2 --stages clean near full-sentences
    .venv/bin/python bench/scale/run.py --gb 0.2 --workers 1 2   # speed-up, same bytes?

For each size a corpus of realistic documents (bench/scale/corpus.py: Python's reST docs,
Debian copyright files, man pages; median about 4 KB) is written under --work, then each
stage runs as `cloze VERB ...` under GNU time (`/usr/bin/time -v`: peak RSS of the stage
and its workers), one after another, on the DirectRunner with its defaults. While a stage
runs, its output directory's size is sampled every half second: the peak above the final
size is the temporary disk it used, and a `.staging-*` left behind is reported. Prints
one table row per stage and size, then, per stage, how peak RSS grew from the smallest to
the largest size. MB/s is the corpus's text megabytes over wall seconds.

With `--workers 1 2` each stage runs once per worker count (more than one worker is the
DirectRunner's `--direct_num_workers N --direct_running_mode multi_processing`): the rows
then give the speed-up over one worker and whether the output is byte-identical to the
one-worker run (every file, .stats.json included). Later stages read the one-worker output.
Worker counts run in turn, every stage at one count before the next count, and a last table
gives each stage's seconds, speed-up and efficiency (speed-up over workers) per count.

On a machine lent for a few minutes (bench/device/run.sh) the stages can share it with
other work: run this under `taskset -c 8-15`, give `--tokenizer` to skip vocab, and
`--widen-after FILE` to wait for FILE before a worker count above the cores allowed, then
run that count on every core of the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from bench.scale.corpus import write_corpus  # noqa: E402

_SCRIPT = Path(sys.executable).with_name("cloze")
CLOZE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "clozeworks"]
# GNU time's -v gives the peak RSS of the stage and its workers; a machine without it can
# name a copy of the binary.
GNU_TIME = os.environ.get("CLOZEWORKS_GNU_TIME", "/usr/bin/time")
STAGES = (
    "clean",
    "dedup",
    "near",
    "vocab",
    "full-sentences",
    "doc-sentences",
    "single",
    "nsp",
    "sop",
    "sso",
    "full-sentences-premask",
    "doc-sentences-premask",
    "single-premask",
    "nsp-premask",
    "sop-premask",
    "sso-premask",
    "build",
)


def commands(
    stage: str, work: Path, extra: list[str], tokenizer: Path | None = None
) -> tuple[list[str], Path]:
    """The stage's command line and its output directory; stages after `clean` read what
    `clean`, `dedup` and `vocab` wrote (or the given tokenizer)."""
    raw, clean, docs = work / "raw", work / "clean", work / "docs"
    tok = tokenizer or work / "tokenizer"
    out = work / f"out-{stage}"
    if stage == "clean":
        return [*CLOZE, "clean", "--input", str(raw), "--output", str(clean), *extra], clean
    if stage == "dedup":
        return [*CLOZE, "dedup", "--input", str(clean), "--output", str(docs), *extra], docs
    if stage == "near":
        cmd = [*CLOZE, "dedup", "--near", "--input", str(clean), "--output", str(out)]
        return [*cmd, *extra], out
    if stage == "vocab":
        cmd = [*CLOZE, "vocab", "--input", str(docs), "--output", str(tok), "--kind", "wordpiece"]
        return [*cmd, *extra], tok
    if stage == "build":
        return [*CLOZE, "build", "--input", str(raw), "--output", str(out), *extra], out
    mode = stage.removesuffix("-premask")
    cmd = [*CLOZE, "shard", "--input", str(docs), "--tokenizer", str(tok), "--output", str(out)]
    cmd += ["--mode", mode]
    if stage.endswith("-premask"):
        cmd += ["--premask", "token", "--dupe-factor", "1"]
    return [*cmd, *extra], out


def worker_flags(workers: int) -> list[str]:
    if workers == 1:
        return []
    return ["--direct_num_workers", str(workers), "--direct_running_mode", "multi_processing"]


def tree_digests(path: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under `path`."""
    digests = {}
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digests[str(file.relative_to(path))] = hashlib.sha256(file.read_bytes()).hexdigest()
    return digests


def differences(a: dict[str, str], b: dict[str, str]) -> str:
    """'identical', or which files differ between two trees."""
    if a == b:
        return "identical"
    only = sorted(set(a) ^ set(b))
    changed = sorted(k for k in set(a) & set(b) if a[k] != b[k])
    parts = []
    if only:
        parts.append(f"{len(only)} files in one only ({', '.join(only[:3])}...)")
    if changed:
        parts.append(f"{len(changed)} files differ ({', '.join(changed[:3])})")
    return "; ".join(parts)


def tree_bytes(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # a file renamed while we looked
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def run_stage(cmd: list[str], out: Path) -> dict[str, float]:
    """Wall seconds, peak RSS (MB) and peak temporary bytes of one command."""
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.5):
            peak[0] = max(peak[0], tree_bytes(out))

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    start = time.perf_counter()
    proc = subprocess.run([GNU_TIME, "-v", *cmd], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    done.set()
    watcher.join()
    if proc.returncode != 0:
        verb = " ".join(cmd[len(CLOZE) : len(CLOZE) + 2])
        raise SystemExit(f"{verb} failed:\n{proc.stderr[-3000:]}")
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))
    final = tree_bytes(out)
    left = [p.name for p in out.glob(".staging-*")] if out.is_dir() else []
    return {
        "seconds": seconds,
        "rss_mb": rss_kb / 1024,
        "temp_mb": max(0, peak[0] - final) / 1e6,
        "left": float(len(left)),
    }


def widen(after: Path | None, workers: int) -> None:
    """Before a worker count above the cores this process may use, wait for `after` to
    exist (other work on the machine is done), then allow every core."""
    allowed = os.sched_getaffinity(0)
    if after is None or workers <= len(allowed):
        return
    while not after.exists():
        time.sleep(1)
    os.sched_setaffinity(0, range(os.cpu_count() or 1))
    print(f"{after} exists: now on all {os.cpu_count()} cores", flush=True)


def summary(timings: dict[str, dict[int, tuple[float, str]]]) -> None:
    """Per stage and worker count: seconds, speed-up over the first count, efficiency."""
    counts = sorted({w for row in timings.values() for w in row})
    print("\nstage: seconds, speed-up and efficiency (speed-up over workers), same bytes")
    for stage, row in timings.items():
        first = counts[0]
        cells = []
        for w in counts:
            if w not in row:
                cells.append(f"{w}: -")
                continue
            seconds, same = row[w]
            speedup = row[first][0] / seconds if first in row else float("nan")
            ratio = speedup / (w / first)
            cells.append(f"{w}: {seconds:.1f} s {speedup:.2f}x {ratio:.0%} {same}")
        print(f"  {stage:24s} " + " | ".join(cells), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--gb", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    p.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES)
    p.add_argument("--work", type=Path, default=ROOT / "bench" / "out" / "scale")
    p.add_argument(
        "--workers", type=int, nargs="+", default=[1], help="worker counts to run each stage with"
    )
    p.add_argument("--tokenizer", type=Path, help="a trained tokenizer (instead of stage vocab)")
    p.add_argument("--files", type=int, default=1, help="input files the corpus is dealt into")
    p.add_argument("--widen-after", type=Path, help="wait for this file before using all cores")
    p.add_argument("--keep", action="store_true", help="keep the corpora and outputs")
    p.add_argument("beam", nargs="*", help="after --: flags for every stage (Beam's too)")
    args = p.parse_args()
    cores = len(os.sched_getaffinity(0))
    print(
        f"machine: {os.cpu_count()} cores, {cores} allowed; load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    header = f"{'stage':24s} {'GB':>5s} {'docs':>9s} {'s':>8s} {'MB/s':>7s} {'RSS MB':>8s}"
    print(header + f" {'temp MB':>8s} {'temp/in':>8s}", flush=True)
    rss: dict[str, list[float]] = {}
    for gb in args.gb:
        work = args.work / f"{gb:g}gb"
        shutil.rmtree(work, ignore_errors=True)
        docs, text = write_corpus(work / "raw" / "corpus.jsonl", gb * 1000, files=args.files)
        firsts: dict[str, dict[str, float]] = {}
        digests: dict[str, dict[str, str]] = {}
        timings: dict[str, dict[int, tuple[float, str]]] = {}
        for workers in args.workers:
            widen(args.widen_after, workers)
            for stage in args.stages:
                extra = [*args.beam, *worker_flags(workers)]
                cmd, out = commands(stage, work, extra, args.tokenizer)
                if workers != args.workers[0]:  # later stages read the first run's output
                    out = out.with_name(f"{out.name}-w{workers}")
                    cmd[cmd.index("--output") + 1] = str(out)
                r = run_stage(cmd, out)
                left = "  staging left behind!" if r["left"] else ""
                if workers == args.workers[0]:
                    firsts[stage], digests[stage] = r, tree_digests(out)
                    rss.setdefault(stage, []).append(r["rss_mb"])
                    note, same = "", "-"
                else:
                    same = differences(digests[stage], tree_digests(out))
                    speedup = firsts[stage]["seconds"] / r["seconds"]
                    note = f"  {workers} workers: {speedup:.2f}x, {same}"
                timings.setdefault(stage, {})[workers] = (r["seconds"], same)
                if workers != args.workers[0] or (
                    not args.keep and stage not in ("clean", "dedup", "vocab")
                ):
                    shutil.rmtree(out, ignore_errors=True)  # later stages do not read it; disk
                print(
                    f"{stage:24s} {gb:5g} {docs:9d} {r['seconds']:8.1f} "
                    f"{text / 1e6 / r['seconds']:7.2f} {r['rss_mb']:8.0f} {r['temp_mb']:8.0f} "
                    f"{r['temp_mb'] * 1e6 / text:8.2f}{left}{note}",
                    flush=True,
                )
        if len(args.workers) > 1:
            summary(timings)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if len(args.gb) > 1:
        print(f"\npeak RSS growth from {args.gb[0]:g} GB to {args.gb[-1]:g} GB:")
        for stage, values in rss.items():
            growth = values[-1] / values[0] - 1
            print(f"  {stage:24s} {values[0]:8.0f} -> {values[-1]:8.0f} MB  {growth:+.0%}")
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
