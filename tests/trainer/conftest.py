"""Shard sets in the pair modes, made from the session's packed shards with the real writer:
each sequence is cut into segments A and B, with labels drawn at random (the mechanics are
what these tests need; the statistics of real pairs are the shard builder's tests)."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from clozeworks.cli import main
from clozeworks.corpus.shards.blocks import iter_blocks, make_block, write_blocks, write_manifest
from clozeworks.schemas.manifest import read_manifest
from clozeworks.schemas.sidecars import TOKENIZER_DIR

CLASSES = {"nsp": 2, "sop": 2, "sso": 3}


@pytest.fixture(autouse=True, scope="session")
def one_thread() -> None:
    """The test models are tiny: one thread is faster than two, and on a shared machine two
    spinning OpenMP threads per process are many times slower (measured 10x)."""
    torch.set_num_threads(1)


def make_pair_shards(source: Path, target: Path, mode: str, seed: int = 0) -> Path:
    manifest = read_manifest(source)
    cls, sep = manifest.special_tokens["cls"], manifest.special_tokens["sep"]
    rng = np.random.default_rng(seed)
    target.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source / TOKENIZER_DIR, target / TOKENIZER_DIR, dirs_exist_ok=True)
    infos = []
    for index, shard in enumerate(manifest.shards):
        blocks = []
        for _, block in iter_blocks(source / shard.name):
            seqs, segments, labels = [], [], []
            for seq in block.sequences():
                body = seq[1:-1][: manifest.max_seq_len - 3]
                cut = max(1, len(body) // 2)
                seqs.append(np.concatenate([[cls], body[:cut], [sep], body[cut:], [sep]]))
                segments.append(cut + 2)
                labels.append(int(rng.integers(CLASSES[mode])))
            blocks.append(make_block(seqs, manifest.token_dtype, segments, labels))
        infos.append(write_blocks(target, index, manifest.token_dtype, blocks))
    write_manifest(target, replace(manifest, mode=mode, shards=tuple(infos)))
    return target


@pytest.fixture(scope="session")
def nsp_shards(shards_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pair_shards(shards_dir, tmp_path_factory.mktemp("nsp"), "nsp")


@pytest.fixture(scope="session")
def sso_shards(shards_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pair_shards(shards_dir, tmp_path_factory.mktemp("sso"), "sso")


def with_sentinels(source: Path, target: Path, count: int = 100) -> Path:
    """`source`'s shards under a tokenizer with T5's sentinels appended (`<extra_id_0>` the
    last id): the ids already in the shards are unchanged, so only the tokenizer and the
    manifest's fingerprint and vocabulary size change."""
    from tokenizers import AddedToken, Tokenizer

    shutil.copytree(source, target, dirs_exist_ok=True)
    path = target / TOKENIZER_DIR / "tokenizer.json"
    tok = Tokenizer.from_file(str(path))
    tok.add_special_tokens(
        [AddedToken(f"<extra_id_{i}>", special=True) for i in range(count)][::-1]
    )
    tok.save(str(path))
    manifest = read_manifest(source)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    size = tok.get_vocab_size(with_added_tokens=True)
    write_manifest(target, replace(manifest, tokenizer_sha256=digest, vocab_size=size))
    return target


@pytest.fixture(scope="session")
def t5_shards(shards_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return with_sentinels(shards_dir, tmp_path_factory.mktemp("t5"))


@pytest.fixture(scope="session")
def tiny_run(nsp_shards, tmp_path_factory):
    """A tiny pretrained run (BERT, 2 layers of 32) that fine-tuning and distillation
    tests start from."""
    tmp = tmp_path_factory.mktemp("pretrained")
    config = tmp / "small.toml"
    config.write_text(
        "[model]\nhidden_size = 32\nnum_layers = 2\nnum_heads = 2\nintermediate_size = 64\n"
        "[optim]\nwarmup_steps = 1\n",
        encoding="utf-8",
    )
    run = tmp / "run"
    args = ["train", "--data", str(nsp_shards), "--output", str(run), "--config", str(config)]
    assert (
        main(
            [
                *args,
                "--objective",
                "mlm,nsp",
                "--max-steps",
                "2",
                "--batch-size",
                "4",
                "--no-progress",
            ]
        )
        == 0
    )
    return run


@pytest.fixture(scope="session")
def doc_shards(small_build, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's documents as doc-sentences rows of up to 96 tokens (BART's shards)."""
    paths = small_build[0]
    out = tmp_path_factory.mktemp("doc") / "shards"
    args = ["shard", "--input", paths.docs, "--tokenizer", paths.tokenizer, "--output", str(out)]
    assert main([*args, "--mode", "doc-sentences", "--max-seq-len", "96", "--no-progress"]) == 0
    return out
