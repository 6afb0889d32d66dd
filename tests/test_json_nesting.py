"""JSON nested deeper than Python's parser recurses, in every file the project reads JSON
from (issue 33, item 5): each reader names the file in one line (exit 2), or counts the
record where skipping records is the documented behaviour; never a RecursionError."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clozeworks.cli import main

DEEP = "[" * 200_000 + "]" * 200_000


@pytest.fixture(scope="module")
def made(small_build, tmp_path_factory) -> dict[str, Path]:
    paths = small_build[0]
    root = tmp_path_factory.mktemp("nesting")
    run = root / "run"
    train = ["train", "--data", paths.shards, "--output", str(run), "--max-steps", "1"]
    assert main([*train, "--warmup", "0.5", "--batch-size", "4", "--no-progress"]) == 0
    return {
        "docs": Path(paths.docs),
        "tokenizer": Path(paths.tokenizer),
        "shards": Path(paths.shards),
        "run": run,
    }


def copy(src: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(src, tmp_path / src.name))


def planted(tmp_path: Path, made: dict[str, Path], what: str, name: str) -> Path:
    """A copy of `what` with `name` (a file in it) replaced by DEEP; returns the copy."""
    where = copy(made[what], tmp_path)
    (where / name).write_text(DEEP)
    return where


def one_line(capsys, code: int, argv: list[str], names: str) -> None:
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert names in err and "\n" not in err and "Recursion" not in err, err


CASES = {
    # (what to copy, the file in it, the command reading it, what the message names)
    "store stats.json, dedup": ("docs", ".stats.json", ["dedup", "--input", "{}"], ".stats.json"),
    "store stats.json, inspect": ("docs", ".stats.json", ["inspect", "{}"], ".stats.json"),
    "vocab_stats.json, inspect": (
        "tokenizer", "vocab_stats.json", ["inspect", "{}"], "vocab_stats",
    ),
    "token_counts.json, shard --premask": (
        "tokenizer", "token_counts.json",
        ["shard", "--input", "DOCS", "--tokenizer", "{}", "--premask", "token"], "token_counts",
    ),
    "tokenizer_config.json, shard": (
        "tokenizer", "tokenizer_config.json", ["shard", "--input", "DOCS", "--tokenizer", "{}"],
        "tokenizer_config.json",
    ),
    "tokenizer.json, shard": (
        "tokenizer", "tokenizer.json", ["shard", "--input", "DOCS", "--tokenizer", "{}"],
        "tokenizer.json",
    ),
    "run config.json, export": ("run", "config.json", ["export", "--run", "{}"], "config.json"),
    "run config.json, inspect": ("run", "config.json", ["inspect", "{}"], "config.json"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_deeply_nested_file_is_one_line(case, made, tmp_path, capsys) -> None:
    what, name, argv, names = CASES[case]
    where = planted(tmp_path, made, what, name)
    argv = [str(where) if a == "{}" else str(made["docs"]) if a == "DOCS" else a for a in argv]
    if argv[0] in ("dedup", "shard", "export"):
        argv += ["--output", str(tmp_path / "out")]
    one_line(capsys, 2, argv, names)
    assert not (tmp_path / "out").exists()


def test_deep_files_beside_a_training_run(made, tmp_path, capsys) -> None:
    run = copy(made["run"], tmp_path)
    (run / "metrics.jsonl").write_text(DEEP + "\n")
    assert main(["inspect", str(run)]) == 0  # a damaged metrics line is a warning
    assert "metrics.jsonl: line 1 is not JSON" in capsys.readouterr().out
    config = tmp_path / "deep.json"
    config.write_text(DEEP)
    train = ["train", "--data", "x", "--output", str(tmp_path / "r"), "--config", str(config)]
    one_line(capsys, 2, train, "deep.json: not valid JSON")
    init = ["train", "--data", str(made["shards"]), "--output", str(tmp_path / "r")]
    init += ["--init-from", str(run), "--max-steps", "1", "--warmup", "0.5"]
    (run / "config.json").write_text(DEEP)
    one_line(capsys, 2, init, "config.json")


def test_a_deep_record_in_clean_is_counted(tmp_path) -> None:
    (tmp_path / "raw.jsonl").write_text(DEEP + "\n" + json.dumps({"text": "a document"}) + "\n")
    assert (
        main(["clean", "--input", str(tmp_path / "raw.jsonl"), "--output", str(tmp_path / "d")])
        == 0
    )
    stats = json.loads((tmp_path / "d" / ".stats.json").read_text())
    assert stats["dropped.bad_json"] == 1 and stats["documents_out"] == 1


def test_a_deep_build_json(tmp_path, capsys) -> None:
    (tmp_path / "raw.jsonl").write_text(json.dumps({"text": "a document"}) + "\n")
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "build.json").write_text(DEEP)
    argv = ["build", "--input", str(tmp_path / "raw.jsonl"), "--output", str(tmp_path / "root")]
    one_line(capsys, 2, argv, "build.json: not valid JSON")
