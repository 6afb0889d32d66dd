"""Progress bars for pipelines on this machine: DoFns' tallies reach the command's bars,
with one worker or two worker processes, and nothing is left behind."""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path

import pytest

from clozeworks.cli import main
from clozeworks.corpus.progress import LOG_EVERY_ENV
from clozeworks.pipelines.clean import CleanConfig, run_clean
from clozeworks.pipelines.plumbing import progress
from clozeworks.pipelines.plumbing.progress import ENV, Tally, read_totals


def test_tallies_add_up_across_files_and_do_nothing_without_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    idle = Tally()
    idle.add("docs", 5)
    idle.save()
    assert idle.path is None and not list(tmp_path.iterdir())
    monkeypatch.setenv(ENV, str(tmp_path))
    monkeypatch.setattr(progress, "SAVE_EVERY_S", 3600.0)  # saved only when asked
    a, b = Tally(), Tally()
    a.add("docs", 3)
    a.add("bytes", 100)
    b.add("docs", 4)
    assert read_totals(str(tmp_path)) == {}
    a.save()
    b.save()
    (tmp_path / "half-written.json").write_text('{"docs": ')  # a file caught mid-write
    assert read_totals(str(tmp_path)) == {"docs": 7, "bytes": 100}


def _last_values(stderr: str) -> dict[str, str]:
    """The last state of each bar, by label."""
    last = {}
    for line in re.split(r"[\r\n]", stderr):
        found = re.match(r"\s*(\w+):\s+(.*)", line)
        if found:
            last[found.group(1)] = found.group(2)
    return last


@pytest.mark.parametrize("workers", [1, 2])
def test_clean_draws_every_input_byte_and_every_kept_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch, workers: int
) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # bars, as on a terminal
    # A temp directory of the test's own: what another run left in /tmp (a process killed
    # with SIGKILL cannot clean up) is not this run's.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(3):
        lines = (json.dumps({"text": f"document {i}.{j} " * 30}) + "\n" for j in range(200))
        (raw / f"{i}.jsonl").write_text("".join(lines))
    size = sum(f.stat().st_size for f in raw.iterdir())
    argv = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]
    config = CleanConfig(inputs=[str(raw)], output=str(tmp_path / "docs"), chunk_bytes=20_000)
    stats = run_clean(config, argv if workers == 2 else [], progress=True)
    bars = _last_values(capsys.readouterr().err)
    assert stats["documents_out"] == 600
    # Byte ranges of 20 kB: many tasks, each adding what it read.
    assert re.match(rf"100%\|.*\| {size / 1024:.0f}k/{size / 1024:.0f}k", bars["read"]), bars
    assert bars["written"].startswith("600docs"), bars
    assert ENV not in os.environ
    assert not list(scratch.glob("cloze-progress-*"))


def test_off_a_terminal_plain_lines_at_an_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    raw = tmp_path / "in.jsonl"
    raw.write_text(json.dumps({"text": "a short document"}) + "\n")
    assert main(["clean", "--input", str(raw), "--output", str(tmp_path / "a")]) == 0
    assert capsys.readouterr().err == ""  # shorter than the interval: the summary says it
    monkeypatch.setenv(LOG_EVERY_ENV, "0")
    assert main(["clean", "--input", str(raw), "--output", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "read: 29 B of 29 B (100.0%)" in err, err
    assert re.search(r"^written: 1 docs, ", err, re.M), err
    argv = ["clean", "--input", str(raw), "--output", str(tmp_path / "c"), "--no-progress"]
    assert main(argv) == 0
    assert capsys.readouterr().err == ""
