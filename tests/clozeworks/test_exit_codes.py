"""One rule for exit codes (docs/design.md, "Exit codes"), checked on every verb that writes
against the same bad outputs and bad flags: each is exit 2 with one line on stderr naming
the path or flag, and nothing is written. Exit 1 (a write the system refused) is
tests/test_full_disk.py; 130 (Ctrl-C) tests/clozeworks/test_cli.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from clozeworks.cli import main
from clozeworks.corpus.text.demo import write_demo_corpus
from tests.trainer.finetune.test_finetune_cli import write_sst2


@pytest.fixture(scope="module")
def inputs(small_build, tmp_path_factory) -> dict[str, Path]:
    paths = small_build[0]
    root = tmp_path_factory.mktemp("exit-codes")
    write_demo_corpus(root / "raw" / "docs.jsonl.gz", limit=50)
    write_sst2(root / "sst2", seed=0, rows=16)
    run = root / "run"
    args = ["train", "--data", paths.shards, "--output", str(run), "--max-steps", "1"]
    assert main([*args, "--warmup", "0.5", "--batch-size", "4", "--no-progress"]) == 0
    return {
        "raw": root / "raw",
        "clean": Path(paths.clean),
        "docs": Path(paths.docs),
        "tokenizer": Path(paths.tokenizer),
        "shards": Path(paths.shards),
        "run": run,
        "sst2": root / "sst2",
    }


TRAIN_TAIL = ["--max-steps", "1", "--warmup", "0.5"]
# verb -> (its command line writing to OUT, the input an output must stay apart from)
Verb = Callable[[dict[str, Path], str], tuple[list[str], Path]]
VERBS: dict[str, Verb] = {
    "clean": lambda i, out: (["clean", "--input", str(i["raw"]), "--output", out], i["raw"]),
    "dedup": lambda i, out: (["dedup", "--input", str(i["clean"]), "--output", out], i["clean"]),
    "vocab": lambda i, out: (
        ["vocab", "--input", str(i["docs"]), "--output", out, "--vocab-size", "300"],
        i["docs"],
    ),
    "shard": lambda i, out: (
        ["shard", "--input", str(i["docs"]), "--tokenizer", str(i["tokenizer"]), "--output", out],
        i["tokenizer"],
    ),
    "build": lambda i, out: (["build", "--input", str(i["raw"]), "--output", out], i["raw"]),
    "train": lambda i, out: (
        ["train", "--data", str(i["shards"]), "--output", out, *TRAIN_TAIL],
        i["shards"],
    ),
    "export": lambda i, out: (["export", "--run", str(i["run"]), "--output", out], i["run"]),
    "finetune": lambda i, out: (
        [
            "finetune",
            "--run",
            str(i["run"]),
            "--task",
            "glue/sst2",
            "--data",
            str(i["sst2"]),
            "--output",
            out,
            "--epochs",
            "1",
        ],
        i["run"],
    ),
}
# A flag each verb takes an integer in, and values no run can use.
INTEGER_FLAG = {verb: "--seed" for verb in VERBS} | {"clean": "--min-chars", "export": "--step"}
BAD_INTEGERS = ["-1", "x", str(2**64), "1e3"]


def refused(argv: list[str], capsys) -> str:
    assert main(argv) == 2, capsys.readouterr().err
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


def tree(path: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_bad_outputs_are_exit_2_naming_the_path(verb, inputs, tmp_path, capsys) -> None:
    afile = tmp_path / "afile"
    afile.write_text("not a directory\n")
    argv, source = VERBS[verb](inputs, str(afile))
    assert f"{afile}: exists and is not a directory" in refused(argv, capsys)
    argv, _ = VERBS[verb](inputs, str(afile / "sub"))
    assert f"{afile}: exists and is not a directory" in refused(argv, capsys)
    assert afile.read_text() == "not a directory\n"

    before = tree(source)
    cases = [(source, "is"), (source / "sub", "is inside"), (source.parent, "contains")]
    if verb == "build":  # raw inputs may sit under the root, beside the stages' directories
        cases.pop()
    for out, how in cases:
        argv, _ = VERBS[verb](inputs, str(out))
        err = refused(argv, capsys)
        assert "choose a place apart" in err, err
        # build names the stage directory under its root that overlaps
        assert f"({out}) {how} " in err or (verb == "build" and str(out) in err), err
    assert tree(source) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_bad_integers_are_exit_2_naming_the_flag(verb, inputs, tmp_path, capsys) -> None:
    flag = INTEGER_FLAG[verb]
    for value in BAD_INTEGERS:
        argv, _ = VERBS[verb](inputs, str(tmp_path / "out"))
        err = refused([*argv, flag, value], capsys)
        assert flag in err, err
    assert list(tmp_path.iterdir()) == []


def test_inspect_html_into_a_bad_place(inputs, tmp_path, capsys) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    argv = ["inspect", str(inputs["docs"]), "--html"]
    assert f"{afile}: exists and is not a directory" in refused(
        [*argv, str(afile / "r.html")], capsys
    )
    assert "is a directory; give --html a file name" in refused([*argv, str(tmp_path)], capsys)
