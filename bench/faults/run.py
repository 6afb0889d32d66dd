"""Issue 14's bad-input and fault cases, run through the real command line; one table row each.

    .venv/bin/python bench/faults/run.py                       # this checkout
    .venv/bin/python bench/faults/run.py --pythonpath /tmp/old  # another install (before)

Each case makes its input (from a small shard set and training run built first with the
same `cloze`), runs one command, and classifies the result:

- `error`: exit 1 or 2 with exactly one line `cloze VERB: error: ...` on stderr;
- `reported`: exit 0 (or 1 from inspect) with the case's reason counted in stats.json or
  printed (`resume: skipping ...`, `BAD shard ...`, a warning);
- `traceback`: "Traceback" on stderr;
- `silent`: exit 0 with nothing said: data lost or a bad setting accepted;
- `other`: anything else (shown with the stderr tail).

The goal is no `traceback` and no `silent`. Prints a Markdown table and the totals.
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import zstandard

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

RECORD = '{"text": "record %d: a sentence of ordinary words. Another sentence follows it."}\n'


@dataclass
class Result:
    code: int
    err: str
    out: str


class Cloze:
    def __init__(self, pythonpath: str | None, work: Path) -> None:
        self.env = {**os.environ, "OMP_NUM_THREADS": "1"}
        if pythonpath:
            self.env["PYTHONPATH"] = pythonpath
        self.work = work

    def __call__(self, *args: str) -> Result:
        done = subprocess.run(
            [sys.executable, "-m", "clozeworks", *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.work,
            timeout=900,
        )
        return Result(done.returncode, done.stderr, done.stdout)


@dataclass
class Case:
    number: str
    name: str
    run: Callable[[Cloze, Path], Result]
    # What counts as a good outcome besides a one-line error: a counted reason to look for.
    skip_reason: str | None = None
    # Where the counted reason is: a stats.json under the case directory, or stderr/stdout.
    skip_in: str = "stats"


def one_line_error(r: Result) -> bool:
    lines = [line for line in r.err.splitlines() if line.strip()]
    return r.code in (1, 2) and len(lines) == 1 and ": error: " in lines[0]


def classify(case: Case, r: Result, where: Path) -> str:
    if "Traceback" in r.err:
        return "traceback"
    if case.skip_reason and r.code in (0, 1):
        if case.skip_in == "stats":
            for stats in where.rglob(".stats.json"):
                if json.loads(stats.read_text()).get(case.skip_reason):
                    return "reported"
        elif case.skip_reason in r.err + r.out:
            return "reported"
    if one_line_error(r):
        return "error"
    if r.code == 0:
        return "silent"
    return "other"


# --- inputs --------------------------------------------------------------------------


def jsonl(n: int = 3000) -> bytes:
    return "".join(RECORD % i for i in range(n)).encode()


def truncated(compress: Callable[[bytes], bytes], suffix: str) -> Callable[[Cloze, Path], Result]:
    def run(cloze: Cloze, d: Path) -> Result:
        data = compress(jsonl())
        (d / "raw").mkdir()
        (d / "raw" / f"cut.jsonl{suffix}").write_bytes(data[: int(len(data) * 0.7)])
        return cloze("clean", "--input", str(d / "raw"), "--output", str(d / "out"))

    return run


def clean_lines(*lines: str, extra: tuple[str, ...] = ()) -> Callable[[Cloze, Path], Result]:
    def run(cloze: Cloze, d: Path) -> Result:
        (d / "in.jsonl").write_text("".join(lines) + RECORD % 0)
        return cloze("clean", "--input", str(d / "in.jsonl"), "--output", str(d / "out"), *extra)

    return run


def clean_flags(*flags: str) -> Callable[[Cloze, Path], Result]:
    return clean_lines(extra=flags)


def train_args(shards: Path, run: Path, *extra: str) -> list[str]:
    return [
        "train",
        "--data",
        str(shards),
        "--output",
        str(run),
        "--max-steps",
        "4",
        "--warmup",
        "0.1",
        "--batch-size",
        "4",
        "--save-every",
        "2",
        "--keep",
        "5",
        "--no-progress",
        *extra,
    ]


def train_toml(text: str) -> Callable[[Cloze, Path], Result]:
    def run(cloze: Cloze, d: Path) -> Result:
        (d / "bad.toml").write_text(text)
        shards = d.parent / "base" / "shards"
        return cloze(*train_args(shards, d / "run", "--config", str(d / "bad.toml")))

    return run


def shard_copy(d: Path) -> Path:
    copy = d / "shards"
    shutil.copytree(d.parent / "base" / "shards", copy)
    return copy


def edit_manifest(d: Path, change: Callable[[dict], None]) -> Path:
    copy = shard_copy(d)
    manifest = json.loads((copy / ".manifest.json").read_text())
    change(manifest)
    (copy / ".manifest.json").write_text(json.dumps(manifest))
    return copy


def long_sequences(cloze: Cloze, d: Path) -> Result:
    # A length-128 set whose manifest claims 64: sequences longer than the set's maximum.
    def shrink(m: dict) -> None:
        m["max_seq_len"] = 64

    return cloze(*train_args(edit_manifest(d, shrink), d / "run"))


def huge_npy_header(verb: str) -> Callable[[Cloze, Path], Result]:
    def run(cloze: Cloze, d: Path) -> Result:
        copy = shard_copy(d)
        shard = sorted(copy.glob("shard-*.tar"))[0]
        data = shard.read_bytes()
        start = data.find(b"{'descr'")
        end = data.find(b"\n", start)
        header = data[start:end]
        # The same header claiming 10^12 elements, padded to the same length: the tar and
        # the .npy framing stay valid, only the claim changes.
        forged = re.sub(rb"'shape': \(\d+,\)", b"'shape': (1000000000000,)", header)
        forged = forged.rstrip(b" ").ljust(len(header))
        assert len(forged) == len(header)
        shard.write_bytes(data[:start] + forged + data[end:])
        _fix_manifest_checksum(copy, shard)
        if verb == "train":
            return cloze(*train_args(copy, d / "run"))
        return cloze("inspect", str(copy), *(["--verify"] if verb == "verify" else []))

    return run


def _fix_manifest_checksum(copy: Path, shard: Path) -> None:
    import hashlib

    manifest = json.loads((copy / ".manifest.json").read_text())
    for entry in manifest["shards"]:
        if entry["name"] == shard.name:
            entry["sha256"] = hashlib.sha256(shard.read_bytes()).hexdigest()
    (copy / ".manifest.json").write_text(json.dumps(manifest))


def run_copy(d: Path) -> Path:
    copy = d / "run"
    shutil.copytree(d.parent / "base" / "run", copy)
    return copy


def damaged_checkpoint(damage: Callable[[Path], None]) -> Callable[[Cloze, Path], Result]:
    def run(cloze: Cloze, d: Path) -> Result:
        copy = run_copy(d)
        newest = sorted(copy.glob("step-*"))[-1]
        damage(newest)
        shards = d.parent / "base" / "shards"
        return cloze(*train_args(shards, copy, "--resume", "--max-steps", "6"))

    return run


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _pickle_weights(step: Path) -> None:
    import pickle

    (step / "model.safetensors").write_bytes(pickle.dumps({"weights": [1, 2, 3]}))


def _no_files(step: Path) -> None:
    for f in step.iterdir():
        if f.name != "COMMITTED":
            f.unlink()


def new_run_into_old(cloze: Cloze, d: Path) -> Result:
    copy = run_copy(d)
    return cloze(*train_args(d.parent / "base" / "shards", copy, "--seed", "99"))


def resume_nothing(cloze: Cloze, d: Path) -> Result:
    return cloze(*train_args(d.parent / "base" / "shards", d / "missing", "--resume"))


def duplicate_ids(cloze: Cloze, d: Path) -> Result:
    (d / "in.jsonl").write_text(
        '{"id": "a", "text": "one document"}\n{"id": "a", "text": "another document"}\n'
    )
    args = ["clean", "--input", str(d / "in.jsonl"), "--output", str(d / "out")]
    return cloze(*args, "--id-field", "id")


def killed_rerun(cloze: Cloze, d: Path) -> Result:
    store = d / "docs"
    shutil.copytree(d.parent / "base" / "docs", store)
    (store / ".staging-0123456789ab").mkdir()
    return cloze("inspect", str(store))


def output_in_the_way(cloze: Cloze, d: Path) -> Result:
    (d / "in.jsonl").write_text(RECORD % 0)
    (d / "file").write_text("not a directory")
    return cloze("clean", "--input", str(d / "in.jsonl"), "--output", str(d / "file" / "out"))


def verify(change: Callable[[Path], None]) -> Callable[[Cloze, Path], Result]:
    def run(cloze: Cloze, d: Path) -> Result:
        copy = shard_copy(d)
        change(copy)
        return cloze("inspect", str(copy), "--verify")

    return run


def _totals_off(copy: Path) -> None:
    manifest = json.loads((copy / ".manifest.json").read_text())
    manifest["totals"]["sequences"] += 1000
    (copy / ".manifest.json").write_text(json.dumps(manifest))


CASES = [
    Case("1", "truncated .zst input (70%)", truncated(zstandard.ZstdCompressor().compress, ".zst")),
    Case("1", "truncated .gz input", truncated(gzip.compress, ".gz")),
    Case("1", "truncated .bz2 input", truncated(bz2.compress, ".bz2")),
    Case("1", "truncated .xz input", truncated(lzma.compress, ".xz")),
    Case("2", "train into another run's directory", new_run_into_old),
    Case("2", "--resume into a directory that does not exist", resume_nothing),
    Case(
        "3",
        'lone surrogate "\\ud800"',
        clean_lines('{"text": "x \\ud800 y"}\n'),
        "dropped.bad_utf8",
    ),
    Case(
        "3",
        "100,000-deep nested JSON",
        clean_lines('{"text": ' + "[" * 100_000 + "]" * 100_000 + "}\n"),
        "dropped.bad_json",
    ),
    Case("4", "sequences longer than the manifest's max_seq_len", long_sequences),
    Case("5", ".npy header with a huge shape: inspect", huge_npy_header("inspect"), "BAD", "out"),
    Case(
        "5",
        ".npy header with a huge shape: inspect --verify",
        huge_npy_header("verify"),
        "BAD",
        "out",
    ),
    Case("5", ".npy header with a huge shape: train", huge_npy_header("train")),
    Case(
        "6",
        "optimizer.pt truncated",
        damaged_checkpoint(lambda s: (s / "optimizer.pt").write_bytes(b"12")),
        "resume: skipping",
        "stderr",
    ),
    Case(
        "6",
        "optimizer.pt missing",
        damaged_checkpoint(lambda s: (s / "optimizer.pt").unlink()),
        "resume: skipping",
        "stderr",
    ),
    Case(
        "6",
        "optimizer.pt random bytes (same size)",
        damaged_checkpoint(
            lambda s: (s / "optimizer.pt").write_bytes(
                os.urandom((s / "optimizer.pt").stat().st_size)
            )
        ),
        "resume: skipping",
        "stderr",
    ),
    Case(
        "6",
        "state.json not JSON",
        damaged_checkpoint(lambda s: (s / "state.json").write_text("{nope")),
        "resume: skipping",
        "stderr",
    ),
    Case(
        "6",
        "COMMITTED step with no files",
        damaged_checkpoint(_no_files),
        "resume: skipping",
        "stderr",
    ),
    Case(
        "6",
        "model.safetensors replaced by a pickle",
        damaged_checkpoint(_pickle_weights),
        "resume: skipping",
        "stderr",
    ),
    Case(
        "6",
        "model.safetensors with a flipped byte",
        damaged_checkpoint(lambda s: _flip(s / "model.safetensors")),
        "resume: skipping",
        "stderr",
    ),
    Case("7", "[model] num_heads = 0", train_toml("[model]\nnum_heads = 0\n")),
    Case("7", "[model] hidden_size = -8", train_toml("[model]\nhidden_size = -8\n")),
    Case("7", "[model] dropout = 2", train_toml("[model]\ndropout = 2\n")),
    Case("7", "[optim] lr = nan", train_toml("[optim]\nlr = nan\n")),
    Case("7", "[model] num_layers = 0", train_toml("[model]\nnum_layers = 0\n")),
    Case("7", "[optim] warmup_steps = -5", train_toml("[optim]\nwarmup_steps = -5\n")),
    Case("7", "clean --min-chars -5", clean_flags("--min-chars", "-5")),
    Case(
        "7",
        "clean --language-languages xx-bogus",
        clean_flags("--filters", "language", "--language-languages", "xx-bogus"),
    ),
    Case("7", "clean --text-field that no record has", clean_flags("--text-field", "body")),
    Case("7", "output path through a file", output_in_the_way),
    Case("8", "--id-field with two documents of id 'a'", duplicate_ids, "dropped.duplicate_id"),
    Case(
        "9", "inspect a store a killed rerun left staging in", killed_rerun, ".staging-", "stderr"
    ),
    Case("10", "inspect --verify: manifest totals off by 1,000", verify(_totals_off)),
    Case(
        "10",
        "inspect --verify: tokenizer/ missing",
        verify(lambda c: shutil.rmtree(c / ".tokenizer")),
        "BAD tokenizer/",
        "out",
    ),
]


def build_base(cloze: Cloze, base: Path) -> None:
    from clozeworks.corpus.text.demo import write_demo_corpus

    write_demo_corpus(base / "raw" / "docs.jsonl.gz", limit=600)
    r = cloze(
        "build",
        "--input",
        str(base / "raw"),
        "--output",
        str(base),
        "--vocab-size",
        "1500",
        "--max-seq-len",
        "128",
    )
    assert r.code == 0, r.err[-2000:]
    r = cloze(*train_args(base / "shards", base / "run"))
    assert r.code == 0, r.err[-2000:]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--pythonpath", help="PYTHONPATH for the clozeworks under test")
    p.add_argument("--work", type=Path, default=None)
    args = p.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="faults-"))
    cloze = Cloze(args.pythonpath, work)
    build_base(cloze, work / "base")
    totals: dict[str, int] = {}
    print("| # | case | exit | outcome | stderr (last line) |\n|---|---|---|---|---|")
    for i, case in enumerate(CASES):
        d = work / f"case-{i:02d}"
        d.mkdir()
        r = case.run(cloze, d)
        outcome = classify(case, r, d)
        totals[outcome] = totals.get(outcome, 0) + 1
        last = (r.err.strip().splitlines() or [""])[-1][:110].replace("|", "\\|")
        print(f"| {case.number} | {case.name} | {r.code} | {outcome} | {last} |", flush=True)
    print(f"\ncases {len(CASES)}: " + ", ".join(f"{k} {v}" for k, v in sorted(totals.items())))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
