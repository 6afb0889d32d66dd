"""A teacher run for the distillation tests: 4 layers of 32, 20 steps on the small shards."""

from __future__ import annotations

from pathlib import Path

import pytest

from clozeworks.cli import main

TEACHER = (
    "[model]\nhidden_size = 32\nnum_layers = 4\nnum_heads = 2\nintermediate_size = 64\n"
    "[optim]\nwarmup_steps = 1\n"
)


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture(scope="package")
def teacher_run(shards_dir, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("teacher")
    run = root / "run"
    args = ["train", "--data", str(shards_dir), "--output", str(run)]
    args += ["--config", write(root / "t.toml", TEACHER), "--max-steps", "20"]
    assert main([*args, "--batch-size", "16", "--lr", "1e-3", "--no-progress"]) == 0
    return run
