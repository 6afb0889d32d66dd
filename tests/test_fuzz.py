"""Each fuzz target (tests/fuzz/targets.py) runs for a fixed number of inputs under atheris,
coverage-guided from its seeds: no crash, hang or unbounded allocation (issue 33, item 9).
Longer runs: `python -m tests.fuzz.run TARGET -max_total_time=600`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.env import ROOT, python_path
from tests.fuzz.targets import TARGETS

RUNS = 5000


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_target_survives_its_inputs(target, tmp_path) -> None:
    pytest.importorskip("atheris")
    found, scratch = tmp_path / "found", tmp_path / "scratch"
    found.mkdir()
    scratch.mkdir()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.fuzz.run",
            target,
            f"-runs={RUNS}",
            "-seed=1",
            f"-artifact_prefix={found}/",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        # The seeds and the targets' files go under pytest's directory, not /tmp.
        env={**os.environ, "PYTHONPATH": python_path(), "TMPDIR": str(scratch)},
    )
    log = done.stderr[-3000:]
    assert done.returncode == 0, log
    assert f"Done {RUNS} runs" in done.stderr, log
    assert list(found.iterdir()) == []  # no crash-*, timeout-*, oom-* input written


def test_collecting_the_targets_leaves_nothing_in_the_temp_directory(tmp_path) -> None:
    """Importing the targets (as pytest's collection does, before any fixture can point the
    temp directory elsewhere) makes no scratch directory; each test run once left one."""
    done = subprocess.run(
        [sys.executable, "-c", "import tests.fuzz.targets"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": python_path(), "TMPDIR": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(tmp_path.iterdir()) == []
