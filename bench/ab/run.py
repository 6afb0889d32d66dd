"""Same-run A/B of the command line against another installed version of clozeworks: every
stage (clean, dedup --near, vocab, shard in two modes, build) and a short training run, the
two versions alternating, on one corpus of real documents.

    pip install --no-deps --target /tmp/before-site <wheel of the other version>
    .venv/bin/python bench/ab/run.py --before /tmp/before-site [--mb 20] [--rounds 2]

"before" runs with PYTHONPATH=BEFORE, "after" with this environment's clozeworks (or
PYTHONPATH=AFTER, so edits made while it runs do not reach it); both
from a scratch directory, so no checkout folder shadows either. Each command runs under
GNU time -v (peak RSS); the table shows each round's wall seconds and peak RSS, and
whether the two versions' outputs are byte-identical (every shard's sha256, the
tokenizer.json, the document parts).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.scale.corpus import write_corpus

CLOZE = [sys.executable, "-m", "clozeworks"]


def run(version: str, sites: dict[str, str], argv: list[str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of `cloze ARGV` under `version`."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if sites.get(version):
        env["PYTHONPATH"] = sites[version]
    cmd = ["/usr/bin/time", "-v", *CLOZE, *argv, "--no-progress"]
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{version}: cloze {' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", done.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    assert wall and rss, done.stderr[-2000:]
    seconds = int(wall[1] or 0) * 3600 + int(wall[2]) * 60 + float(wall[3])
    return seconds, int(rss[1]) / 1024


def digest(path: Path) -> str:
    """What must be the same between versions: shard checksums, tokenizer.json, parts, a
    run's logged losses."""
    if (path / "metrics.jsonl").is_file():
        records = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
        losses = [{k: v for k, v in r.items() if k.endswith("loss")} for r in records]
        return hashlib.sha256(json.dumps(losses).encode()).hexdigest()
    # The manifest's name before and after sidecars took a leading dot (either version).
    found = [path / n for n in (".manifest.json", "manifest.json") if (path / n).is_file()]
    if found:
        manifest = json.loads(found[0].read_text())
        return hashlib.sha256("".join(s["sha256"] for s in manifest["shards"]).encode()).hexdigest()
    if (path / "tokenizer.json").is_file():
        return hashlib.sha256((path / "tokenizer.json").read_bytes()).hexdigest()
    sha = hashlib.sha256()
    for part in sorted(path.glob("part-*.parquet")):
        sha.update(part.read_bytes())
    return sha.hexdigest()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True, help="a --target install of the other version")
    p.add_argument(
        "--after", help="a --target install to run as 'after' (default: this environment's)"
    )
    p.add_argument("--mb", type=float, default=20, help="corpus size (bench/scale documents)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=40, help="training steps")
    p.add_argument("--skip", nargs="*", default=[], help="stages no other reads: nsp, build, train")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="ab-") as tmp:
        work = Path(tmp)
        docs, size = write_corpus(work / "raw" / "docs.jsonl", args.mb)
        print(f"corpus: {docs} documents, {size / 1e6:.1f} MB; load {os.getloadavg()}")
        stages = [
            ("clean", lambda o: ["clean", "--input", "raw", "--output", o, "--id-field", "id"]),
            ("dedup --near", lambda o: ["dedup", "--input", "{clean}", "--output", o, "--near"]),
            ("vocab wordpiece", lambda o: ["vocab", "--input", "{docs}", "--output", o]),
            (
                "shard full-sentences",
                lambda o: ["shard", "--input", "{docs}", "--tokenizer", "{tok}", "--output", o],
            ),
            (
                "shard nsp",
                lambda o: [
                    "shard",
                    "--input",
                    "{docs}",
                    "--tokenizer",
                    "{tok}",
                    "--output",
                    o,
                    "--mode",
                    "nsp",
                ],
            ),
            ("build", lambda o: ["build", "--input", "raw", "--output", o, "--vocab-size", "8000"]),
            (
                "train bert-small",
                lambda o: [
                    "train",
                    "--data",
                    "{shards}",
                    "--output",
                    o,
                    "--preset",
                    "bert-small",
                    "--max-steps",
                    str(args.steps),
                    "--batch-size",
                    "16",
                    "--warmup",
                    "0.1",
                    "--save-every",
                    str(args.steps),
                    "--overwrite",
                ],
            ),
        ]
        rows = []
        for name, make in stages:
            if name.split()[-1] in args.skip or name.split()[0] in args.skip:
                continue
            times: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
            digests: dict[str, str] = {}
            for r in range(args.rounds):
                for version in ("before", "after") if r % 2 == 0 else ("after", "before"):
                    out = f"{version}-{name.split()[0]}-{name.split()[-1]}"
                    paths = {
                        "clean": f"{version}-clean-clean",
                        "docs": f"{version}-dedup---near",
                        "tok": f"{version}-vocab-wordpiece",
                        "shards": f"{version}-shard-full-sentences",
                    }
                    argv = [a.format(**paths) for a in make(out)]
                    if (work / out).exists() and name != "train bert-small":
                        shutil.rmtree(work / out)
                    sites = {"before": args.before, "after": args.after}
                    times[version].append(run(version, sites, argv, work))
                    target = work / out / "shards" if name == "build" else work / out
                    digests[version] = digest(target)
            same = str(digests["before"] == digests["after"])
            rows.append((name, times, same))
            print(f"done {name}: {times} identical={same}", file=sys.stderr)
        print("| stage | before s | after s | before MB | after MB | outputs identical |")
        print("|---|---|---|---|---|---|")
        for name, times, same in rows:
            b, a = times["before"], times["after"]
            print(
                f"| {name} | {', '.join(f'{t:.1f}' for t, _ in b)} | "
                f"{', '.join(f'{t:.1f}' for t, _ in a)} | {max(m for _, m in b):.0f} | "
                f"{max(m for _, m in a):.0f} | {same} |"
            )
        print(f"load at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
