"""Every verb refuses an output that is, is inside, or contains one of its inputs, in one
line naming both flags, before it touches anything (issue 33, item 2): an output inside
the input is read back by the next run; one that holds the input replaces it."""

from __future__ import annotations

from pathlib import Path

import pytest

from clozeworks.cli import main

TAIL = "a run would read or replace what it writes; choose a place apart"


def _refused(argv: list[str], capsys, flag: str, how: str, other: str) -> None:
    before = {p for p in Path(argv[argv.index("--output") + 1]).parent.rglob("*")}
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"cloze {argv[0]}: error: {flag} ("), err
    assert f") {how} {other} (" in err and err.endswith(TAIL), err
    after = {p for p in Path(argv[argv.index("--output") + 1]).parent.rglob("*")}
    assert after == before  # nothing made, nothing removed


@pytest.mark.parametrize(
    ("output", "how"), [("raw", "is"), ("raw/docs", "is inside"), (".", "contains")]
)
def test_clean(tmp_path, capsys, monkeypatch, output, how) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "a.jsonl").write_text('{"text": "one document"}\n')
    _refused(["clean", "--input", "raw", "--output", output], capsys, "--output", how, "--input")


def test_clean_rejects_inside_the_input(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "a.jsonl").write_text('{"text": "one document"}\n')
    argv = ["clean", "--input", "raw", "--output", "docs", "--rejects", "raw/rejects"]
    assert main(argv) == 2
    assert "--rejects (raw/rejects) is inside --input (raw)" in capsys.readouterr().err
    assert not (tmp_path / "docs").exists()


def test_dedup_vocab_shard_build(small_build, capsys) -> None:
    paths, _ = small_build
    inside = f"{paths.docs}/out"
    _refused(
        ["dedup", "--input", paths.docs, "--output", inside],
        capsys,
        "--output",
        "is inside",
        "--input",
    )
    _refused(
        ["vocab", "--input", paths.docs, "--output", inside],
        capsys,
        "--output",
        "is inside",
        "--input",
    )
    shard = ["shard", "--input", paths.docs, "--tokenizer", paths.tokenizer]
    _refused(
        [*shard, "--output", f"{paths.tokenizer}/s"], capsys, "--output", "is inside", "--tokenizer"
    )
    emit = ["dedup", "--input", paths.docs, "--output", f"{paths.docs}-x", "--emit-clusters"]
    assert main([*emit, f"{paths.docs}/c"]) == 2
    assert "--emit-clusters" in capsys.readouterr().err
    build = ["build", "--input", paths.clean, "--output", str(Path(paths.clean).parent)]
    assert main(build) == 2
    assert ") is --input (" in capsys.readouterr().err
