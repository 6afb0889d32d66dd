"""kill -9 at several points of clean, dedup, vocab and shard, then run again: the output
is byte-identical to an uninterrupted run's, and no staging directory is left (issue 14).
Training's kill-and-resume is tests/trainer/test_resume.py."""

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clozeworks.corpus.text.demo import write_demo_corpus

pytestmark = pytest.mark.slow
KILL_AT = (0.3, 0.6, 0.9)  # fractions of the uninterrupted run's wall time


def stages(root: Path) -> dict[str, list[str]]:
    raw, clean, docs = root / "raw", root / "clean", root / "docs"
    tok, shards = root / "tokenizer", root / "shards"
    return {
        "clean": ["clean", "--input", str(raw), "--output", str(clean)],
        "dedup": ["dedup", "--near", "--input", str(clean), "--output", str(docs)],
        "vocab": ["vocab", "--input", str(docs), "--output", str(tok), "--vocab-size", "2000"],
        "shard": [
            "shard",
            "--input",
            str(docs),
            "--tokenizer",
            str(tok),
            "--output",
            str(shards),
            "--mode",
            "nsp",
            "--max-seq-len",
            "64",
        ],
    }


def output_of(args: list[str]) -> Path:
    return Path(args[args.index("--output") + 1])


def tree(path: Path) -> dict[str, str]:
    return {
        str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(path.rglob("*"))
        if f.is_file()
    }


def start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "clozeworks", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: the kill takes any workers too
    )


def finish(args: list[str]) -> float:
    began = time.perf_counter()
    proc = start(args)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()[-2000:]
    return time.perf_counter() - began


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("crash")
    write_demo_corpus(root / "raw" / "docs.jsonl.gz", limit=1500)
    runs = {}
    for name, args in stages(root).items():
        seconds = finish(args)
        runs[name] = (seconds, tree(output_of(args)))
    return root, runs


@pytest.mark.parametrize("stage", ["clean", "dedup", "vocab", "shard"])
def test_a_killed_run_then_a_rerun_equals_an_uninterrupted_one(reference, stage) -> None:
    root, runs = reference
    seconds, expected = runs[stage]
    args = stages(root)[stage]
    out = output_of(args)
    landed = 0  # kills that left a run half-written
    for fraction in KILL_AT:
        proc = start(args)
        time.sleep(seconds * fraction)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        landed += bool(list(out.glob(".staging-*")))
        finish(args)
        assert tree(out) == expected, f"{stage} killed at {fraction:.0%} of its run"
        assert not list(out.glob(".staging-*"))
    assert landed, f"no kill of {stage} landed while it was writing"
