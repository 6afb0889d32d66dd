"""A disk that takes no more bytes (issue 33): the run exits 1 with one line naming the
file it could not write, and leaves no temporary file and no directory of its own behind.
The limit is the process's file-size limit (RLIMIT_FSIZE: every write past it fails, as on
a full disk, with EFBIG instead of ENOSPC), which needs no privileges; the same messages
were checked by hand on a 400 KB tmpfs ("No space left on device")."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

from clozeworks.corpus.text.demo import write_demo_corpus

LIMIT = 64 * 1024  # bytes per file: the inputs are read, the first big output fails


def _small_files() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def cloze_limited(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clozeworks", *args],
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=_small_files,
    )


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_clean_names_the_file_and_leaves_nothing(tmp_path) -> None:
    write_demo_corpus(tmp_path / "raw" / "docs.jsonl.gz", limit=1500)
    disk = tmp_path / "disk"
    disk.mkdir()
    done = cloze_limited("clean", "--input", str(tmp_path / "raw"), "--output", str(disk / "clean"))
    assert done.returncode == 1, done.stderr[-2000:]
    said = done.stderr.strip()
    assert said.startswith(f"cloze clean: error: {disk / 'clean'}/.staging-"), said
    assert ".parquet: cannot write: File too large" in said and "\n" not in said
    assert files_under(disk) == []


def test_shard_names_the_file_and_leaves_nothing(small_build, tmp_path) -> None:
    paths = small_build[0]
    out = tmp_path / "disk" / "shards"
    args = ["shard", "--input", paths.docs, "--tokenizer", paths.tokenizer, "--output", str(out)]
    done = cloze_limited(*args, "--max-seq-len", "64", "--sequences-per-shard", "100000")
    assert done.returncode == 1, done.stderr[-2000:]
    said = done.stderr.strip()
    assert said.startswith(f"cloze shard: error: {out}/.shard-000000.tar."), said
    assert ".tmp: cannot write: File too large" in said and "\n" not in said
    assert files_under(tmp_path / "disk") == []


def test_train_names_the_checkpoint_and_leaves_no_half_of_it(small_build, tmp_path) -> None:
    run = tmp_path / "run"
    done = cloze_limited("train", "--data", small_build[0].shards, "--output", str(run),
                         "--max-steps", "4", "--warmup", "0.5", "--batch-size", "4",
                         "--save-every", "2", "--no-progress")  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    said = done.stderr.strip()
    assert said.startswith(f"cloze train: error: {run}/.step-0000002.tmp: cannot write: "), said
    assert "File too large" in said and "\n" not in said
    assert not [p for p in run.iterdir() if p.name.startswith(".")]  # no temporary, no lock
