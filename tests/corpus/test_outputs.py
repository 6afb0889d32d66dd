"""The one output-filesystem abstraction: the same contract on the local disk and on Beam's
FileSystems, which is what every pipeline writes through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clozeworks.corpus.outputs import LOCAL, OutputFS
from clozeworks.pipelines.plumbing.beamfs import BEAM_FS

BACKENDS = pytest.mark.parametrize("fs", [LOCAL, BEAM_FS], ids=["local", "beam"])


def _files(directory: Path) -> list[str]:
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*"))


@BACKENDS
def test_write_atomic_leaves_only_the_file(fs: OutputFS, tmp_path: Path) -> None:
    fs.write_json(fs.join(str(tmp_path), "a.json"), {"b": 1, "a": [1, 2]})
    assert _files(tmp_path) == ["a.json"]
    assert (tmp_path / "a.json").read_text() == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n'
    assert fs.read_json(str(tmp_path / "a.json")) == {"a": [1, 2], "b": 1}


class _Boom(Exception):
    pass


@BACKENDS
def test_write_atomic_failing_midway_leaves_nothing(
    fs: OutputFS, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "keep.json").write_text("old")

    def fail(*_: object) -> None:
        raise _Boom

    monkeypatch.setattr(type(fs), "rename", fail)
    with pytest.raises(_Boom):
        fs.write_atomic(str(tmp_path / "keep.json"), b"new")
    assert _files(tmp_path) == ["keep.json"]
    assert (tmp_path / "keep.json").read_text() == "old"


@BACKENDS
def test_commit_replaces_matching_files_and_writes_the_marker_last(
    fs: OutputFS, tmp_path: Path
) -> None:
    out = str(tmp_path)
    for name in ("part-0.txt", "part-1.txt", "stats.json", "other.bin"):
        (tmp_path / name).write_text("old")
    staging = fs.new_staging_dir(out)
    assert Path(staging).is_dir() and Path(staging).name.startswith(".staging-")
    with fs.create(fs.join(staging, "part-7.txt")) as f:
        f.write(b"new")
    targets = fs.commit(staging, out, "part-*.txt", "stats.json", {"documents": 1})
    assert targets == [fs.join(out, "part-7.txt")]
    # Files outside the pattern stay; the staging directory is gone.
    assert _files(tmp_path) == ["other.bin", "part-7.txt", "stats.json"]
    assert json.loads((tmp_path / "stats.json").read_text()) == {"documents": 1}


def test_a_marker_that_cannot_be_placed_takes_the_new_files_back(tmp_path: Path) -> None:
    """The marker is written beside its place before anything moves; if it then cannot be
    moved into place (here a directory holds its name), the files moved are removed again
    and no part file stands at the final names without a marker. A marker temporary that
    a killed commit left is cleared by the next. (Local disk: a directory in the way is a
    failure there; Beam's local filesystem moves the file into it.)"""
    fs, out = LOCAL, str(tmp_path)
    (tmp_path / ".stats.json.0123abcd.tmp").write_text("left by a killed commit")
    (tmp_path / "stats.json").mkdir()
    (tmp_path / "stats.json" / "x").write_text("in the way")
    staging = fs.new_staging_dir(out)
    with fs.create(fs.join(staging, "part-7.txt")) as f:
        f.write(b"new")
    with pytest.raises(Exception):  # noqa: B017 (each backend says it its own way)
        fs.commit(staging, out, "part-*.txt", "stats.json", {"documents": 1})
    left = [n for n in _files(tmp_path) if not n.startswith(".staging-")]
    assert left == ["stats.json", "stats.json/x"], left


@BACKENDS
def test_listing_matching_and_removing(fs: OutputFS, tmp_path: Path) -> None:
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    for name in ("b.txt", "a.txt", "sub/c.txt", "sub/deeper/d.txt"):
        (tmp_path / name).write_text(name)
    assert fs.listdir(str(tmp_path)) == ["a.txt", "b.txt"]
    assert fs.listdir(str(tmp_path / "missing")) == []
    assert fs.match(fs.join(str(tmp_path), "*.txt")) == [
        fs.join(str(tmp_path), "a.txt"),
        fs.join(str(tmp_path), "b.txt"),
    ]
    assert fs.match(fs.join(str(tmp_path), "nothing-*")) == []
    fs.delete([str(tmp_path / "a.txt"), str(tmp_path / "never-there.txt")])
    fs.remove_tree(str(tmp_path / "sub"))
    assert _files(tmp_path) == ["b.txt"]
    fs.remove_tree(str(tmp_path / "sub"))  # already gone: not an error


@BACKENDS
def test_mkdirs_refuses_a_file_in_the_way(fs: OutputFS, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(Exception, match="exists and is not a directory"):
        fs.mkdirs(str(tmp_path / "file"))
    fs.mkdirs(str(tmp_path / "new" / "dir"))
    fs.mkdirs(str(tmp_path / "new" / "dir"))
    assert (tmp_path / "new" / "dir").is_dir()


@BACKENDS
def test_a_new_staging_dir_removes_what_an_interrupted_run_left(
    fs: OutputFS, tmp_path: Path
) -> None:
    # What a kill -9 leaves: a staging directory with files, nested ones too.
    (tmp_path / ".staging-deadbeef" / "shuffle").mkdir(parents=True)
    (tmp_path / ".staging-deadbeef" / "shuffle" / "a.spill").write_bytes(b"x" * 100)
    (tmp_path / ".staging-deadbeef" / "part-0.parquet").write_bytes(b"x")
    (tmp_path / "stats.json").write_text("{}")  # the committed output stays
    staging = fs.new_staging_dir(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([Path(staging).name, "stats.json"])


@pytest.mark.parametrize(
    ("output", "source", "how"),
    [
        ("work/raw", "work/raw", "is"),
        ("work/raw/", "./work/raw", "is"),
        ("work/raw/out", "work/raw", "is inside"),
        ("work", "work/raw", "contains"),
        ("work/raw2", "work/raw", None),  # a shared prefix is not a parent
        ("work/out", "work/raw/*.jsonl", None),
        ("work/raw/x", "work/raw/*.jsonl", "is inside"),  # a glob counts as its directory
        ("gs://b/work/raw/out", "gs://b/work/raw", "is inside"),
        ("gs://b/work", "gs://b/work/raw/", "contains"),
        ("gs://b/work/raw", "s3://b/work/raw", None),
    ],
)
def test_overlap(tmp_path, monkeypatch, output, source, how) -> None:
    from clozeworks.corpus.outputs import overlap

    monkeypatch.chdir(tmp_path)
    assert overlap(output, source) == how


def test_overlap_sees_through_a_symlink(tmp_path) -> None:
    from clozeworks.corpus.outputs import overlap

    (tmp_path / "raw").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "raw")
    assert overlap(str(tmp_path / "alias" / "out"), str(tmp_path / "raw")) == "is inside"
