"""One run per output, with real processes (issue 33): while another process holds an
output's lock, `clean`, `shard`, `build` and `train` into it exit 2 naming that process and
leave the output as it was; a lock left by a killed process is taken over with a message;
two real `cloze train` runs into one directory never both run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clozeworks.corpus.locks import LOCK_FILE
from tests.test_crash_consistency import tree

HOLD = (
    "from clozeworks.corpus.locks import OutputLock;from clozeworks.corpus.outputs import LOCAL;"
    "import sys,time;lock=OutputLock(LOCAL,sys.argv[1],'clean');lock.acquire();"
    "print('held',flush=True);time.sleep(600)"
)


def cloze(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clozeworks", *args], capture_output=True, text=True, timeout=600
    )


def hold(output: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(output)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("raw") / "docs.jsonl"
    lines = [
        json.dumps({"text": f"Document {i} says something about locks. " * 8}) for i in range(60)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def verbs(raw: Path, small_build, out: Path) -> dict[str, list[str]]:
    paths = small_build[0]
    return {
        "clean": ["clean", "--input", str(raw), "--output", str(out)],
        "shard": ["shard", "--input", paths.docs, "--tokenizer", paths.tokenizer,
                  "--output", str(out), "--max-seq-len", "64"],
        "build": ["build", "--input", str(raw), "--output", str(out), "--vocab-size", "300"],
        "train": ["train", "--data", paths.shards, "--output", str(out), "--max-steps", "2",
                  "--warmup", "0.5", "--batch-size", "4", "--no-progress"],
    }  # fmt: skip


@pytest.mark.parametrize("verb", ["clean", "shard", "build", "train"])
def test_an_output_in_use_is_refused_naming_the_run(verb, raw, small_build, tmp_path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "earlier.txt").write_text("what was there")
    holder = hold(out)
    try:
        before = tree(out)
        done = cloze(*verbs(raw, small_build, out)[verb])
        assert done.returncode == 2, done.stderr[-2000:]
        said = done.stderr.strip()
        assert f"in use by `cloze clean` (PID {holder.pid} on " in said, said
        assert "\n" not in said and "Traceback" not in said
        assert tree(out) == before  # nothing touched, not even a staging directory
        assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE, "earlier.txt"]
    finally:
        holder.kill()
        holder.wait()


def test_a_killed_runs_lock_is_taken_over(raw, tmp_path) -> None:
    out = tmp_path / "clean"
    holder = hold(out)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    done = cloze("clean", "--input", str(raw), "--output", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"taking over the lock of `cloze clean` (PID {holder.pid} on " in done.stderr
    assert "no longer running" in done.stderr
    assert not (out / LOCK_FILE).exists() and (out / ".stats.json").is_file()


def test_two_training_runs_into_one_directory(small_build, tmp_path) -> None:
    """A real `cloze train` holds its run directory for its whole life: a second one,
    started while the first trains, is refused; the first finishes as if alone."""
    run = tmp_path / "run"
    args = ["train", "--data", small_build[0].shards, "--output", str(run), "--batch-size", "4",
            "--warmup", "0.1", "--save-every", "1000000", "--no-progress",
            "--max-steps", "100000"]  # fmt: skip
    first = subprocess.Popen(
        [sys.executable, "-m", "clozeworks", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not (run / "metrics.jsonl").exists():  # training, not just starting
            assert first.poll() is None and time.monotonic() < deadline, first.stderr
            time.sleep(0.2)
        second = cloze(*args[:-2], "--max-steps", "2", "--overwrite")
        assert second.returncode == 2, second.stderr[-2000:]
        assert f"in use by `cloze train` (PID {first.pid} on " in second.stderr
        assert (run / "metrics.jsonl").exists() and (run / "config.json").exists()
    finally:
        first.send_signal(signal.SIGTERM)  # stops at the next step with a checkpoint
        _, err = first.communicate(timeout=300)
    assert first.returncode == 143, err[-2000:]
    assert "stopped by SIGTERM" in err
    assert not (run / LOCK_FILE).exists()
