"""`inspect --verify` and `train` agree (issue 33, item 6): every damage to a shard set that
would make training or export fail is a problem `inspect --verify` exits non-zero for, and
`train` refuses the set in one line before its first step."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from clozeworks.cli import main


def empty_shard_list(d: Path) -> None:
    manifest = json.loads((d / ".manifest.json").read_text())
    manifest["shards"] = []
    manifest.pop("totals", None)
    (d / ".manifest.json").write_text(json.dumps(manifest))


def tokenizer_without_vocabulary(d: Path) -> None:
    for name in ("tokenizer.json", "vocab.txt"):
        (d / ".tokenizer" / name).unlink()


def no_tokenizer(d: Path) -> None:
    shutil.rmtree(d / ".tokenizer")


def truncated_tokenizer(d: Path) -> None:
    path = d / ".tokenizer" / "tokenizer.json"
    path.write_bytes(path.read_bytes()[:200])


DAMAGE: dict[str, Callable[[Path], None]] = {
    "empty shard list": empty_shard_list,
    "tokenizer/ without tokenizer.json or vocab.txt": tokenizer_without_vocabulary,
    "no tokenizer/": no_tokenizer,
    "truncated tokenizer.json": truncated_tokenizer,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_verify_and_train_refuse_the_same_sets(damage, shards_dir, tmp_path, capsys) -> None:
    shards = Path(shutil.copytree(shards_dir, tmp_path / "shards"))
    DAMAGE[damage](shards)
    assert main(["inspect", "--verify", str(shards)]) != 0
    capsys.readouterr()

    run = tmp_path / "run"
    argv = ["train", "--data", str(shards), "--output", str(run), "--max-steps", "2"]
    assert main([*argv, "--warmup", "0.5", "--batch-size", "4", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and str(shards) in err, err
    assert not run.exists() or not list(run.glob("step-*"))  # refused before step 1


def test_an_undamaged_set_passes_both(shards_dir, tmp_path, capsys) -> None:
    assert main(["inspect", "--verify", str(shards_dir)]) == 0
    run = tmp_path / "run"
    argv = ["train", "--data", str(shards_dir), "--output", str(run), "--max-steps", "1"]
    assert main([*argv, "--warmup", "0.5", "--batch-size", "4", "--no-progress"]) == 0
