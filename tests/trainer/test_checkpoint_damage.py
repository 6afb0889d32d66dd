"""Damaged checkpoints (issue 14, case 6): COMMITTED records each file's size and sha256,
so `--resume` finds the damage before loading and falls back to the newest intact step,
saying which it skipped and why; the resumed run still ends bit-identical."""

import io
import json
import pickle
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from clozeworks.cli import main
from clozeworks.trainer.checkpoint import intact_problem, step_dir
from tests.trainer.test_resume import STEPS, train_args


def _truncate(path):
    path.write_bytes(path.read_bytes()[:-100])


def _random_same_size(path):
    path.write_bytes(np.random.default_rng(0).bytes(path.stat().st_size))


def _flip_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _pickle_instead(path):
    buf = io.BytesIO()
    pickle.dump({"weights": [1, 2, 3]}, buf)  # what a swapped-in pickle would hold
    path.write_bytes(buf.getvalue())


DAMAGE = {
    "optimizer truncated": ("optimizer.pt", _truncate, "optimizer.pt has"),
    "optimizer missing": ("optimizer.pt", lambda p: p.unlink(), "optimizer.pt is missing"),
    "optimizer random bytes": ("optimizer.pt", _random_same_size, "optimizer.pt's sha256"),
    "state.json garbage": ("state.json", lambda p: p.write_text("{nope"), "state.json has"),
    "weights byte flipped": ("model.safetensors", _flip_byte, "model.safetensors's sha256"),
    "weights a pickle": ("model.safetensors", _pickle_instead, "model.safetensors has"),
    "committed, no files": (None, None, "is missing"),
    "marker damaged": ("COMMITTED", lambda p: p.write_text("{}"), "COMMITTED is damaged"),
}


@pytest.fixture(scope="module")
def whole(shards_dir, tmp_path_factory):
    run = tmp_path_factory.mktemp("whole") / "run"
    assert main(train_args(shards_dir, run)) == 0
    return run


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_resume_skips_a_damaged_step_and_ends_identical(shards_dir, whole, tmp_path, capsys, case):
    run = tmp_path / "run"
    shutil.copytree(whole, run)
    last = step_dir(run, STEPS)
    name, damage, reason = DAMAGE[case]
    if name is None:
        for f in last.iterdir():
            if f.name != "COMMITTED":
                f.unlink()
    else:
        damage(last / name)
    assert intact_problem(last) is not None
    capsys.readouterr()
    assert main([*train_args(shards_dir, run), "--resume"]) == 0
    out, err = capsys.readouterr()
    # This invocation trained the steps after the intact checkpoint, and says so.
    assert "trained 4 steps in" in out and f"(from step {STEPS - 4} to {STEPS})" in out
    assert f"resume: skipping step-{STEPS:07d}: " in err and reason in err, err
    a = load_file(whole / f"step-{STEPS:07d}" / "model.safetensors")
    b = load_file(last / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert intact_problem(last) is None  # rewritten by the resumed run


def test_an_intact_run_has_checksums_and_old_markers_still_load(whole, tmp_path) -> None:
    marker = json.loads((step_dir(whole, STEPS) / "COMMITTED").read_text())
    assert marker["step"] == STEPS and set(marker["files"]) == {
        "model.safetensors",
        "optimizer.pt",
        "state.json",
    }
    old = tmp_path / "old"
    shutil.copytree(step_dir(whole, STEPS), old)
    (old / "COMMITTED").write_text(f"{STEPS}\n")  # written before checksums existed
    assert intact_problem(old) is None


def test_every_step_damaged_is_one_clean_error(shards_dir, whole, tmp_path, capsys) -> None:
    run = tmp_path / "run"
    shutil.copytree(whole, run)
    for step in (4, 8, 12, 16):
        _flip_byte(step_dir(run, step) / "model.safetensors")
    assert main([*train_args(shards_dir, run), "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("no intact checkpoint among 4 committed")
    assert sum("resume: skipping" in line for line in err) == 4


def test_export_names_a_damaged_checkpoint(whole, tmp_path, capsys) -> None:
    run = tmp_path / "run"
    shutil.copytree(whole, run)
    _flip_byte(step_dir(run, STEPS) / "model.safetensors")
    assert main(["export", "--run", str(run), "--output", str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err.strip()
    assert "damaged checkpoint" in err and f"--step {STEPS - 4}" in err and "\n" not in err
