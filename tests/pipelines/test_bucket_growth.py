"""The shard deal's buckets and the local shuffle's grow with the corpus (each bucket stays
about its size, tests/corpus/shards/test_instances.py and tests/pipelines/plumbing/
test_shuffle.py hold the bound): with both sizes lowered so that this small store needs
more buckets than the old cap of 4,096, `cloze shard` writes the same bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from clozeworks.cli import main
from clozeworks.corpus.shards import dealing
from clozeworks.pipelines.plumbing import options, shuffle


def _shard(paths, out: Path) -> dict[str, bytes]:
    args = ["shard", "--input", paths.docs, "--tokenizer", paths.tokenizer, "--output", str(out)]
    assert main([*args, "--max-seq-len", "64", "--num-shards", "4", "--no-progress"]) == 0
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}


def test_more_buckets_than_the_old_cap_give_the_same_shards(
    small_build, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = small_build[0]
    before = _shard(paths, tmp_path / "default")  # in memory, 16 deal buckets
    text = sum(p.stat().st_size for p in Path(paths.docs).rglob("*") if p.is_file())
    monkeypatch.setattr(dealing, "DEAL_BUCKET_BYTES", 16)
    monkeypatch.setattr(shuffle, "BUCKET_BYTES", 32)
    monkeypatch.setattr(options, "IN_MEMORY_BELOW", 0)  # groupings spill through files
    assert dealing.bucket_bits_for(text) > 12  # past 4,096 deal buckets
    assert shuffle.buckets_for(text) > 4096
    after = _shard(paths, tmp_path / "many")
    assert before.keys() == after.keys() and any(n.endswith(".tar") for n in before)
    assert before == after
