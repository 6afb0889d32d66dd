"""Without a terminal (nohup, Slurm, a CI log) progress is a plain line at an interval, not
a bar's carriage returns and not silence (issue 34, item 1); with --no-progress, nothing."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time

from clozeworks.corpus.progress import LOG_EVERY_ENV, LineProgress, progress_bar
from clozeworks.corpus.text.demo import write_demo_corpus


def test_lines_say_done_rate_share_eta_and_the_postfix(monkeypatch) -> None:
    monkeypatch.setenv(LOG_EVERY_ENV, "0")
    out = io.StringIO()
    bar = progress_bar(200, "train", "step", stream=out)
    assert isinstance(bar, LineProgress)
    for _ in range(100):
        bar.update(1)
    bar.set_postfix(loss="5.123")
    bar.update(1)
    bar.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 102 and "\r" not in out.getvalue()  # one per update at interval 0
    assert lines[-2].startswith("train: 101 step of 200 step (50.5%), ")
    assert "step/s, ETA " in lines[-2] and lines[-2].endswith("loss 5.123")


def test_no_line_before_the_interval_and_none_when_disabled(monkeypatch) -> None:
    monkeypatch.setenv(LOG_EVERY_ENV, "3600")
    out = io.StringIO()
    bar = progress_bar(10, "read", "bytes", stream=out)
    bar.update(5 << 20)
    bar.close()
    assert out.getvalue() == ""  # a short run is said by its command's summary alone
    off = io.StringIO()
    quiet = progress_bar(10, "read", "bytes", enabled=False, stream=off)
    quiet.update(3)
    quiet.close()
    assert off.getvalue() == ""


def test_bytes_and_durations_read_as_people_write_them(monkeypatch) -> None:
    monkeypatch.setenv(LOG_EVERY_ENV, "0")
    bar = LineProgress(2 << 30, "read", "bytes", 0, io.StringIO())
    bar._start -= 10  # ten seconds in
    bar.n = 512 << 20
    line = bar.line(time.monotonic())
    assert line.startswith("read: 512.0 MB of 2.0 GB (25.0%), 51.2 MB/s, ETA 0:00:30")


def test_a_corpus_stage_and_training_log_lines_without_a_terminal(shards_dir, tmp_path) -> None:
    raw = tmp_path / "raw.jsonl"
    raw.write_text("".join(json.dumps({"text": f"document {i} " * 40}) + "\n" for i in range(3000)))
    env = {**os.environ, LOG_EVERY_ENV: "0.2"}
    args = ["clean", "--input", str(raw), "--output", str(tmp_path / "docs")]
    done = subprocess.run([sys.executable, "-m", "clozeworks", *args], capture_output=True,
                          text=True, env=env, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "\r" not in done.stderr
    read = [line for line in done.stderr.splitlines() if line.startswith("read: ")]
    assert read and " of " in read[-1] and "/s" in read[-1], done.stderr[-2000:]

    train = [
        "train",
        "--data",
        str(shards_dir),
        "--output",
        str(tmp_path / "run"),
        "--max-steps",
        "30",
        "--warmup",
        "0.1",
        "--batch-size",
        "4",
        "--log-every",
        "1",
        "--device",
        "cpu",
    ]
    done = subprocess.run([sys.executable, "-m", "clozeworks", *train], capture_output=True,
                          text=True, env={**env, LOG_EVERY_ENV: "0"}, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    summary = next(line for line in done.stderr.splitlines() if line.startswith("train: "))
    assert " parameters, mlm, on cpu x1 in fp32; 30 steps x 4 sequences = 120 sequences" in summary
    assert " epochs of the set's " in summary and " tokens), about " in summary
    steps = [line for line in done.stderr.splitlines() if line.startswith("train: ")][1:]
    assert len(steps) >= 30 and "\r" not in done.stderr
    assert steps[-1].startswith("train: 30 step of 30 step (100.0%)") and "loss " in steps[-1]

    quiet = subprocess.run([sys.executable, "-m", "clozeworks", *train[:4], str(tmp_path / "q"),
                            *train[5:], "--no-progress"], capture_output=True, text=True,
                           env={**env, LOG_EVERY_ENV: "0"}, timeout=600)  # fmt: skip
    assert quiet.returncode == 0 and "train: " not in quiet.stderr, quiet.stderr[-2000:]


def test_vocab_off_a_terminal_prints_no_blank_lines(tmp_path) -> None:
    """tokenizers' own trainer bars print empty lines where stderr is no terminal (three
    of them in `make demo`'s log, from build's vocab stage); there only the plain
    progress lines are printed."""
    write_demo_corpus(tmp_path / "raw" / "docs.jsonl.gz", limit=2000)
    argv = ["build", "--input", str(tmp_path / "raw"), "--output", str(tmp_path / "b")]
    argv += ["--vocab-size", "2000", "--max-seq-len", "64"]
    done = subprocess.run([sys.executable, "-m", "clozeworks", *argv], capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    for stream in (done.stdout, done.stderr):  # indicatif's blank lines were on stdout
        assert "" not in stream.splitlines() and "\r" not in stream, repr(stream)
