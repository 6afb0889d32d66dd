"""Small inputs group in memory (Beam's GroupByKey) instead of through files: the same
bytes come out either way, for every Beam verb that groups."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from clozeworks.corpus.text.demo import write_demo_corpus
from clozeworks.corpus.vocab.train import VocabConfig
from clozeworks.pipelines.clean import CleanConfig, run_clean
from clozeworks.pipelines.dedup import DedupConfig, run_dedup
from clozeworks.pipelines.plumbing import options
from clozeworks.pipelines.shard import ShardConfig, run_shard
from clozeworks.pipelines.vocab import VocabRunConfig, run_vocab


def _digests(directory: Path, root: Path) -> dict[str, str]:
    """sha256 of every file; stats and manifests name their input, so that path is cut."""
    digests = {}
    for p in sorted(directory.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.suffix == ".json":
                data = data.replace(str(root).encode(), b"ROOT")
            digests[str(p.relative_to(directory))] = hashlib.sha256(data).hexdigest()
    return digests


def _chain(root: Path, raw: Path) -> dict[str, dict[str, str]]:
    run_clean(CleanConfig(inputs=[str(raw)], output=str(root / "clean"), id_field=None))
    run_dedup(
        DedupConfig(
            inputs=[str(root / "clean")], output=str(root / "docs"), near=True, line_dedup=True
        )
    )
    vocab = VocabConfig(kind="wordpiece", vocab_size=1200)
    run_vocab(VocabRunConfig(input=str(root / "docs"), output=str(root / "tok"), vocab=vocab))
    config = ShardConfig(
        input=str(root / "docs"),
        tokenizer=str(root / "tok"),
        output=str(root / "shards"),
        mode="nsp",
        max_seq_len=64,
        sequences_per_shard=300,
    )
    run_shard(config)
    return {name: _digests(root / name, root) for name in ("clean", "docs", "shards")}


def test_pipelines_in_memory_write_what_they_write_through_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = tmp_path / "raw" / "docstrings.jsonl.gz"
    write_demo_corpus(raw, limit=400)
    files = _chain(tmp_path / "files", raw)  # the suite's default: IN_MEMORY_BELOW = 0
    monkeypatch.setattr(options, "IN_MEMORY_BELOW", options.IN_MEMORY_BELOW or 16 << 20)
    memory = _chain(tmp_path / "memory", raw)
    assert files == memory
    # Which path each run took (neither leaves its shuffle files behind to look at).
    assert options.shuffle_for(options.pipeline_options([]), "x", 1 << 20).directory is None
    monkeypatch.setattr(options, "IN_MEMORY_BELOW", 0)
    assert options.shuffle_for(options.pipeline_options([]), "x", 1 << 20).directory == "x"
