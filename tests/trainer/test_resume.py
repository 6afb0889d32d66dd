"""Kill -9 after a checkpoint, resume, and end bit-identical to an uninterrupted run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from clozeworks.cli import main
from clozeworks.trainer.checkpoint import committed_steps, step_dir
from tests.env import ROOT, python_path

STEPS = 16


def train_args(shards: Path, run: Path) -> list[str]:
    return [
        "train",
        "--data",
        str(shards),
        "--output",
        str(run),
        "--preset",
        "bert-tiny",
        "--max-steps",
        str(STEPS),
        "--warmup",
        "0.1",
        "--batch-size",
        "8",
        "--save-every",
        "4",
        "--keep",
        "10",
        "--log-every",
        "2",
        "--lr",
        "5e-4",
        "--warmup-steps",
        "3",
        "--no-progress",
        # bit-identical on a GPU too (its atomics sum in another order on every run)
        "--deterministic",
    ]


def losses(run: Path) -> list[tuple]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [(r["step"], r["mlm_loss"], r["mlm_accuracy"], r["lr"]) for r in map(json.loads, lines)]


def test_kill_and_resume_matches_uninterrupted(shards_dir, tmp_path) -> None:
    whole = tmp_path / "whole"
    assert main(train_args(shards_dir, whole)) == 0

    broken = tmp_path / "broken"
    proc = subprocess.Popen(
        [sys.executable, "-m", "clozeworks", *train_args(shards_dir, broken)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": python_path(), "OMP_NUM_THREADS": "1"},
    )
    deadline = time.time() + 120
    while not (broken / "step-0000008" / "COMMITTED").exists():
        assert proc.poll() is None and time.time() < deadline, "trainer ended before step 8"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (broken / f"step-{STEPS:07d}").exists()

    assert main([*train_args(shards_dir, broken), "--resume"]) == 0
    a = load_file(whole / f"step-{STEPS:07d}" / "model.safetensors")
    b = load_file(broken / f"step-{STEPS:07d}" / "model.safetensors")
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert losses(whole) == losses(broken)


@pytest.mark.slow
def test_a_kill_during_a_checkpoint_write_leaves_the_previous_one_usable(
    shards_dir, tmp_path
) -> None:
    # A model large enough that writing its checkpoint (weights, Adam moments, fsync) takes
    # a while, checkpointed every step: kill -9 the moment a temporary step directory exists.
    config = tmp_path / "wide.toml"
    config.write_text("[model]\nhidden_size = 512\nnum_layers = 4\nnum_heads = 8\n")
    run = tmp_path / "run"
    args = [*train_args(shards_dir, run), "--config", str(config)]
    args[args.index("--save-every") + 1] = "1"
    args[args.index("--max-steps") + 1] = "6"
    proc = subprocess.Popen(
        [sys.executable, "-m", "clozeworks", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": python_path(), "OMP_NUM_THREADS": "1"},
    )
    deadline = time.time() + 300
    while not list(run.glob(".step-*.tmp")) or not committed_steps(run):
        assert proc.poll() is None and time.time() < deadline, "no checkpoint write was caught"
        time.sleep(0.001)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert list(run.glob(".step-*.tmp")), "the kill did not land during a write"

    newest = step_dir(run, committed_steps(run)[-1])
    from clozeworks.trainer.export import load_run

    _, model, _ = load_run(run)  # the newest committed checkpoint loads
    assert model is not None and (newest / "COMMITTED").is_file()
    assert main([*args, "--resume"]) == 0
    assert committed_steps(run)[-1] == 6
    assert not list(run.glob(".step-*.tmp"))  # the resumed run rewrote that step cleanly


def test_an_uncommitted_checkpoint_is_ignored(shards_dir, tmp_path) -> None:
    run = tmp_path / "run"
    args = train_args(shards_dir, run)
    args[args.index("--max-steps") + 1] = "4"
    assert main(args) == 0
    # a crash during the next checkpoint write: the directory exists, COMMITTED does not
    partial = run / "step-0000008"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"garbage")
    assert committed_steps(run) == [4]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_checkpoints_exits_128_plus_it_and_resumes_identically(
    shards_dir, tmp_path, sig
):
    whole = tmp_path / "whole"
    args = train_args(shards_dir, whole)
    args[args.index("--save-every") + 1] = "1000"  # no checkpoint but the signal's
    assert main(args) == 0

    stopped = tmp_path / "stopped"
    args = train_args(shards_dir, stopped)
    args[args.index("--save-every") + 1] = "1000"
    proc = subprocess.Popen(
        [sys.executable, "-m", "clozeworks", *args],
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    metrics = stopped / "metrics.jsonl"
    while not (metrics.exists() and metrics.read_text().count("\n") >= 2):  # past step 4
        assert proc.poll() is None and time.time() < deadline, "trainer ended before step 4"
        time.sleep(0.01)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, err  # 143, 130: the run did not finish
    at = committed_steps(stopped)
    assert len(at) == 1 and 4 <= at[0] < STEPS, at
    assert f"stopped by {sig.name} at step {at[0]}" in err

    assert main([*train_args(shards_dir, stopped), "--resume"]) == 0
    a = load_file(whole / f"step-{STEPS:07d}" / "model.safetensors")
    b = load_file(stopped / f"step-{STEPS:07d}" / "model.safetensors")
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert losses(whole) == losses(stopped)
