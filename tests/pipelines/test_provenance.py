"""`cloze shard --provenance` (issue 34, item 2): every sequence names the documents its
tokens came from, in every mode, and their ids, sources and meta come back from the shard
set alone. Checked on documents written in disjoint vocabularies, so the documents a
sequence holds can be read off its tokens."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clozeworks.cli import main
from clozeworks.corpus.shards.sequences import sequences
from clozeworks.corpus.vocab.train import load_tokenizer
from clozeworks.schemas.manifest import read_manifest
from tests.conftest import write_jsonl

DOCS = 12


@pytest.fixture(scope="module")
def store(tokenizer_dir, tmp_path_factory) -> tuple[Path, dict[int, int]]:
    """A store of DOCS documents, document d written only in its own words, each with a
    `label` kept as meta; and which document each of those words' ids belongs to."""
    tok = load_tokenizer(tokenizer_dir).tokenizer
    words = sorted(w for w in tok.get_vocab() if w.isalpha() and w.isascii() and len(w) > 3)
    assert len(words) >= DOCS * 8
    rng = random.Random(7)
    rng.shuffle(words)
    owner: dict[int, int] = {}
    records = []
    for d in range(DOCS):
        own = words[d * 8 : (d + 1) * 8]
        owner.update({tok.token_to_id(w): d for w in own})
        sentences = [" ".join(rng.choice(own) for _ in range(6)) + "." for _ in range(25)]
        records.append({"text": " ".join(sentences), "label": d % 3, "doc": d})
    root = tmp_path_factory.mktemp("provenance")
    write_jsonl(root / "raw" / "docs.jsonl", records)
    argv = ["clean", "--input", str(root / "raw"), "--output", str(root / "docs")]
    assert main([*argv, "--meta-fields", "label,doc", "--no-progress"]) == 0
    return root / "docs", owner


def _shard(store: Path, tokenizer: Path, out: Path, *flags: str) -> Path:
    argv = ["shard", "--input", str(store), "--tokenizer", str(tokenizer), "--output", str(out)]
    assert main([*argv, "--max-seq-len", "64", "--provenance", "--no-progress", *flags]) == 0
    return out


@pytest.mark.parametrize(
    "flags",
    [
        ("--mode", "full-sentences"),
        ("--mode", "doc-sentences"),
        ("--mode", "single"),
        ("--mode", "nsp"),
        ("--mode", "sop"),
        ("--mode", "sso"),
        ("--mode", "doc-sentences", "--premask", "token", "--dupe-factor", "2"),
    ],
    ids=lambda f: "-".join(x.strip("-") for x in f[1:]) if isinstance(f, tuple) else f,
)
def test_every_sequence_names_the_documents_it_holds(store, tokenizer_dir, tmp_path, flags):
    docs, owner = store
    out = _shard(docs, tokenizer_dir, tmp_path / "shards", *flags)
    rows = list(sequences(out))
    assert len(rows) == read_manifest(out).sequences > 0
    mode = flags[1]
    spanning = 0
    for row in rows:
        ids = row.get("masked_labels", [])
        tokens = list(row["input_ids"])
        for position, original in zip(row.get("masked_positions", []), ids, strict=True):
            tokens[position] = original  # what the sequence held before masking
        seen = list(dict.fromkeys(owner[t] for t in tokens if t in owner))
        named = [doc["meta"]["doc"] for doc in row["documents"]]
        if mode in ("nsp", "sso"):  # A's document, then a random B's (if any)
            assert set(seen) == set(named) and named[0] in seen
        else:
            assert seen == named, row
        for doc in row["documents"]:
            d = doc["meta"]["doc"]
            assert doc["meta"]["label"] == d % 3 and doc["id"] == f"raw/docs.jsonl#{d + 1}"
            assert doc["source"] == "raw/docs.jsonl"
        spanning += len(named) > 1
    if mode == "full-sentences":
        assert spanning > 0  # packed across documents, and said so
    if mode in ("doc-sentences", "single", "sop"):
        assert spanning == 0


def test_without_the_flag_the_shards_are_as_before(store, tokenizer_dir, tmp_path) -> None:
    docs, _ = store
    argv = ["shard", "--input", str(docs), "--tokenizer", str(tokenizer_dir), "--no-progress"]
    plain = tmp_path / "plain"
    assert main([*argv, "--output", str(plain), "--max-seq-len", "64"]) == 0
    traced = _shard(docs, tokenizer_dir, tmp_path / "traced")
    a, b = read_manifest(plain), read_manifest(traced)
    assert [s.sequences for s in a.shards] == [s.sequences for s in b.shards]
    assert [r["input_ids"] for r in sequences(plain)] == [r["input_ids"] for r in sequences(traced)]
    assert "documents" not in next(sequences(plain))
    assert not (plain / ".provenance").exists()
    # The table: one row per document of the store, with its meta.
    table = pq.read_table(traced / ".provenance")
    assert table.num_rows == DOCS
    assert sorted(json.loads(m)["doc"] for m in table.column("meta").to_pylist()) == list(
        range(DOCS)
    )
    # The trainer and inspect read such a set as any other.
    assert main(["inspect", "--verify", str(traced)]) == 0
    run = ["train", "--data", str(traced), "--output", str(tmp_path / "run"), "--no-progress"]
    assert (
        main(
            [
                *run,
                "--preset",
                "bert-tiny",
                "--max-steps",
                "2",
                "--batch-size",
                "4",
                "--warmup",
                "0.5",
            ]
        )
        == 0
    )
    # Rebuilt without the flag, the old table goes.
    assert main([*argv, "--output", str(traced), "--max-seq-len", "64"]) == 0
    assert not (traced / ".provenance").exists()
    assert main(["inspect", "--verify", str(plain)]) == 0
