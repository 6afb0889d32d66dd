"""A store and a shard set read by the usual dataset calls, as the README shows; and the
sets written before the sidecars took a leading dot still read and are cleaned up."""

from __future__ import annotations

import itertools
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from clozeworks.cli import main
from clozeworks.corpus.shards.sequences import sequences
from clozeworks.pipelines.read_store import read_store_stats
from clozeworks.schemas.manifest import read_manifest
from clozeworks.trainer.data.source import resolve_source, tokenizer_files

datasets = pytest.importorskip("datasets")

README = Path(__file__).parents[1] / "README.md"


@pytest.fixture(scope="module")
def work(small_build, tmp_path_factory) -> Path:
    """`work/docs` and `work/shards`, as the README names them."""
    paths, _ = small_build
    root = tmp_path_factory.mktemp("readers") / "work"
    root.mkdir()
    (root / "docs").symlink_to(paths.docs)
    (root / "shards").symlink_to(paths.shards)
    return root


def test_a_store_is_a_parquet_dataset(work, tmp_path) -> None:
    expected = read_store_stats(str(work / "docs")).documents_out
    assert expected > 0
    assert pq.read_table(work / "docs").num_rows == expected
    assert pads.dataset(work / "docs", format="parquet").count_rows() == expected
    ds = datasets.load_dataset(
        "parquet", data_dir=str(work / "docs"), split="train", cache_dir=str(tmp_path)
    )
    assert len(ds) == expected and ds.column_names == ["id", "text", "source", "meta"]


def test_a_shard_set_is_a_webdataset(work, tmp_path) -> None:
    manifest = read_manifest(work / "shards")
    blocks = datasets.load_dataset(
        "webdataset", data_dir=str(work / "shards"), split="train", cache_dir=str(tmp_path)
    )
    assert len(blocks) == sum(s.blocks for s in manifest.shards)
    got = []
    for block in blocks:
        tokens, offsets = np.asarray(block["tokens.npy"]), np.asarray(block["offsets.npy"])
        got += [tokens[a:b].tolist() for a, b in itertools.pairwise(offsets)]
    ours = [row["input_ids"] for row in sequences(work / "shards")]
    assert len(ours) == manifest.sequences
    assert sorted(got) == sorted(ours)


def test_the_readme_block_runs(work, monkeypatch, tmp_path) -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Reading the outputs with other tools", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None, "the README lost its reading example"
    monkeypatch.chdir(work.parent)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path))
    names: dict = {}
    exec(compile(block.group(1), "README.md", "exec"), names)
    assert names["docs"].num_rows == len(names["docs_ds"]) > 0
    assert len(names["tokens"]) == names["offsets"][-1]
    assert all(len(s) > 0 for s in names["sequences"])


def _legacy(src: Path, dest: Path, renames: dict[str, str]) -> Path:
    """A copy of `src` with its sidecars under the names a set written before had."""
    shutil.copytree(src, dest, symlinks=False)
    for new, old in renames.items():
        (dest / new).rename(dest / old)
    return dest


def test_sets_written_before_still_read(small_build, tmp_path, capsys) -> None:
    paths, manifest = small_build
    docs = _legacy(Path(paths.docs), tmp_path / "docs", {".stats.json": "stats.json"})
    shards = _legacy(
        Path(paths.shards),
        tmp_path / "shards",
        {".manifest.json": "manifest.json", ".tokenizer": "tokenizer"},
    )
    assert read_store_stats(str(docs)) == read_store_stats(paths.docs)
    assert read_manifest(shards) == manifest
    source = resolve_source(str(shards))
    assert source.tokenizer_url == f"{shards}/tokenizer/tokenizer.json"
    assert "tokenizer.json" in tokenizer_files(source)
    listed = resolve_source([str(shards / s.name) for s in manifest.shards])
    assert listed.manifest == manifest and listed.tokenizer_url == source.tokenizer_url
    assert main(["inspect", "--verify", str(shards)]) == 0
    assert main(["inspect", str(docs)]) == 0
    # A run into an old directory leaves only the new names.
    argv = ["shard", "--input", str(docs), "--tokenizer", paths.tokenizer, "--no-progress"]
    assert main([*argv, "--output", str(shards), "--max-seq-len", "64"]) == 0
    names = {p.name for p in shards.iterdir()}
    assert {".manifest.json", ".tokenizer"} <= names
    assert not {"manifest.json", "tokenizer"} & names
    assert main(["dedup", "--input", str(docs), "--output", str(docs / ".." / "d2")]) == 0
    argv = ["dedup", "--input", str(tmp_path / "d2"), "--output", str(docs)]
    assert main(argv) == 0
    names = {p.name for p in docs.iterdir()}
    assert ".stats.json" in names and "stats.json" not in names
    stats = json.loads((docs / ".stats.json").read_text())
    assert stats["documents_out"] > 0
    capsys.readouterr()
