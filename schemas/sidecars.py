"""The names of the files beside a store's Parquet parts and a shard set's tars.

They start with a dot so that the readers that take a directory as a dataset read only the
data: pyarrow's dataset discovery (`pq.read_table(dir)`) skips names starting with `.` or
`_`, Hugging Face `datasets` (`load_dataset("parquet", data_dir=dir)`, and `"webdataset"`)
skips only names starting with `.`. Stores and shard sets written before had plain names
(`stats.json`, `manifest.json`, `tokenizer/`); every reader still finds those.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

# A document store's commit marker (schemas.stats.StoreStats), written last.
STATS_FILE = ".stats.json"
# A shard set's commit marker (schemas.manifest.Manifest), written last.
MANIFEST_FILE = ".manifest.json"
# A copy of the tokenizer the shards were encoded with, so a shard set is self-contained.
TOKENIZER_DIR = ".tokenizer"
# `cloze shard --provenance`: the documents the sequences were made from, by key.
PROVENANCE_DIR = ".provenance"

LEGACY_NAMES = {
    STATS_FILE: "stats.json",
    MANIFEST_FILE: "manifest.json",
    TOKENIZER_DIR: "tokenizer",
}


def names_of(name: str) -> tuple[str, ...]:
    """`name` and the name earlier versions gave the same file, the current one first."""
    legacy = LEGACY_NAMES.get(name)
    return (name, legacy) if legacy else (name,)


def locate(
    directory: str, name: str, exists: Callable[[str], bool], join: Callable[..., str]
) -> str:
    """The path of sidecar `name` in `directory` as it was written: under its current name,
    else under its earlier one, else (for the error that follows) its current one."""
    for candidate in names_of(name):
        path = join(directory, candidate)
        if exists(path):
            return path
    return join(directory, name)


def local(directory: str | os.PathLike[str], name: str) -> Path:
    """`locate` in a directory on this machine."""
    return Path(locate(os.fspath(directory), name, os.path.exists, os.path.join))
