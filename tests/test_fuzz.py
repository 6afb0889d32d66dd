"""Each fuzz target (tests/fuzz/targets.py) runs for a fixed number of inputs under atheris,
coverage-guided from its seeds: no crash, hang or unbounded allocation (issue 33, item 9).
Longer runs: `python -m tests.fuzz.run TARGET -max_total_time=600`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.targets import TARGETS

pytestmark = pytest.mark.slow
RUNS = 5000
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_target_survives_its_inputs(target, tmp_path) -> None:
    pytest.importorskip("atheris")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.fuzz.run",
            target,
            f"-runs={RUNS}",
            "-seed=1",
            f"-artifact_prefix={tmp_path}/",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    log = done.stderr[-3000:]
    assert done.returncode == 0, log
    assert f"Done {RUNS} runs" in done.stderr, log
    assert list(tmp_path.iterdir()) == []  # no crash-*, timeout-*, oom-* input written
