"""Shared fixtures: one small corpus, tokenizer and shard set built once per test session
with the real pipelines (DirectRunner) from the stdlib's docstrings."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from clozeworks.corpus.shards.settings import ShardSettings
from clozeworks.corpus.text.demo import write_demo_corpus
from clozeworks.corpus.vocab.train import VocabConfig, load_tokenizer
from clozeworks.pipelines.build import BuildConfig, BuildPaths, run_build
from clozeworks.pipelines.plumbing import options
from clozeworks.schemas.manifest import Manifest
from tests.corpus.shards.shard_sets import token_stream, write_shard_set

SMALL_DOCS = 800


@pytest.fixture(scope="session", autouse=True)
def _group_through_files():
    """Test corpora are far below `IN_MEMORY_BELOW`, so they would group in memory; the
    tests run the path real corpora take, through files. (test_pipelines_in_memory checks
    that the in-memory path writes the same bytes.)"""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(options, "IN_MEMORY_BELOW", 0)
        yield


@pytest.fixture(scope="session", autouse=True)
def _system_temp_in_tmp(tmp_path_factory: pytest.TempPathFactory):
    """What Beam and the libraries put in the system temp (a pipeline built and never run
    leaves Beam's `beam-pipeline-temp*`) goes under pytest's own directory, not /tmp.
    tests/pipelines/test_runner.py checks that our runs leave nothing there."""
    temp = str(tmp_path_factory.mktemp("system-temp"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", temp)
        patch.setenv("TMPDIR", temp)  # and the subprocesses' (torchrun's, Beam's workers')
        yield


@pytest.fixture(scope="session", autouse=True)
def _shard_cache_in_tmp(tmp_path_factory: pytest.TempPathFactory):
    """Remote shards are cached under $CLOZEWORKS_CACHE; never in the user's home."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CLOZEWORKS_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="session")
def small_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[BuildPaths, Manifest]:
    root = tmp_path_factory.mktemp("build")
    raw = root / "raw" / "docstrings.jsonl.gz"
    write_demo_corpus(raw, limit=SMALL_DOCS)
    config = BuildConfig(
        inputs=[str(raw.parent)],
        root=str(root),
        vocab=VocabConfig(kind="wordpiece", vocab_size=2000),
        shard=ShardSettings(max_seq_len=64, sequences_per_shard=300),
    )
    return run_build(config, report=lambda _: None)


@pytest.fixture(scope="session")
def shards_dir(small_build: tuple[BuildPaths, Manifest]) -> Path:
    return Path(small_build[0].shards)


@pytest.fixture(scope="session")
def premasked_pairs(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Path:
    """A pre-masked nsp shard set written straight from token ids (no pipeline)."""
    root = tmp_path_factory.mktemp("premasked")
    info = load_tokenizer(tokenizer_dir)
    write_shard_set(root / "shards", info, token_stream(info), mode="nsp", premasked=True)
    return root / "shards"


@pytest.fixture(scope="session")
def tokenizer_dir(small_build: tuple[BuildPaths, Manifest]) -> Path:
    return Path(small_build[0].tokenizer)


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path
