"""Ctrl-C as a terminal sends it (SIGINT to the whole process group, job control on) in the
middle of every long verb: one line, exit 130, nothing half-written left in the output
(no staging directory, temporary file or lock), and a rerun succeeds (issue 34, item 5)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clozeworks.corpus.progress import LOG_EVERY_ENV

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("raw") / "docs.jsonl"
    words = [
        "the",
        "model",
        "reads",
        "a",
        "sentence",
        "and",
        "predicts",
        "the",
        "words",
        "it",
        "cannot",
        "see",
    ]
    with path.open("w") as f:
        for i in range(20_000):
            text = " ".join(words[(i + j) % len(words)] for j in range(120)) + f". Doc {i}."
            f.write(json.dumps({"text": text}) + "\n")
    return path


def verbs(raw: Path, small_build, out: Path) -> dict[str, list[str]]:
    paths = small_build[0]
    return {
        "clean": ["clean", "--input", str(raw), "--output", str(out)],
        "dedup": ["dedup", "--near", "--input", paths.clean, "--output", str(out)],
        "vocab": ["vocab", "--input", paths.docs, "--output", str(out), "--vocab-size", "800"],
        "shard": ["shard", "--input", paths.docs, "--tokenizer", paths.tokenizer,
                  "--output", str(out), "--mode", "nsp", "--premask", "token",
                  "--dupe-factor", "10"],
        "build": ["build", "--input", str(raw), "--output", str(out), "--vocab-size", "800"],
        "train": ["train", "--data", paths.shards, "--output", str(out), "--max-steps",
                  "100000", "--warmup", "0.01", "--batch-size", "4"],
        "demo": ["demo", "--output", str(out), "--limit-docs", "800", "--vocab-size", "800",
                 "--steps", "100000"],
    }  # fmt: skip


# The line after which each verb is interrupted: its first progress line, or for the
# demo its training's (where a Ctrl-C once gave a traceback).
STARTED = {"demo": "train"}


def left_behind(out: Path) -> list[str]:
    return sorted(
        str(p.relative_to(out))
        for p in out.rglob("*")
        if p.name.startswith((".staging-", ".cloze.lock")) or p.name.endswith(".tmp")
    )


@pytest.mark.parametrize("verb", ["clean", "dedup", "vocab", "shard", "build", "train", "demo"])
def test_ctrl_c_mid_run_is_one_line_and_exit_130(verb, raw, small_build, tmp_path) -> None:
    out = tmp_path / "out"
    argv = verbs(raw, small_build, out)[verb]
    env = {**os.environ, LOG_EVERY_ENV: "0.1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "clozeworks", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own process group, as a shell's job
    )
    assert proc.stderr is not None
    # Mid-run: the first progress line says the work has started (not just the imports).
    deadline = time.monotonic() + 300
    lines = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        assert line, f"{verb} ended before it could be interrupted: {''.join(lines)[-2000:]}"
        lines.append(line)
        if ": " in line and "/s" in line and line.startswith(STARTED.get(verb, "")):
            break
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, rest = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{verb} hung after Ctrl-C")
    # Train stops at the next step with a checkpoint (its documented Ctrl-C), exit 130 too.
    if verb in ("train", "demo"):
        assert proc.returncode == 130, rest[-2000:]
        assert "Traceback" not in rest, rest[-2000:]
        assert "stopped by SIGINT" in rest and "--resume continues from it" in rest
    else:
        assert proc.returncode == 130, rest[-2000:]
        errors = [line for line in rest.splitlines() if "error" in line or "Traceback" in line]
        assert errors == [f"cloze {verb}: error: interrupted"], rest[-2000:]
    assert left_behind(out) == [] if out.exists() else True
