import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clozeworks.cli import main
from clozeworks.corpus.inspect.stages import (
    detect_kind,
    docs_summary,
    tokenizer_summary,
    unfinished_runs,
)
from clozeworks.corpus.inspect.text import render
from clozeworks.corpus.locks import OutputLock
from clozeworks.corpus.outputs import LOCAL
from clozeworks.schemas.documents import DOCUMENT
from clozeworks.schemas.errors import BadInputError


def test_real_document_store_agrees_with_a_plain_count(small_build) -> None:
    paths, _ = small_build
    for directory in (Path(paths.clean), Path(paths.docs)):
        s = docs_summary(directory)
        texts = [
            t for f in sorted(directory.glob("part-*.parquet")) for t in pq.read_table(f)["text"]
        ]
        lengths = np.array([len(t.as_py()) for t in texts])
        stats = json.loads((directory / ".stats.json").read_text())
        assert s["complete"] and s["problems"] == []
        assert s["documents"] == len(texts) == stats["documents_out"]
        assert s["bytes"] == sum(len(t.as_py().encode()) for t in texts)
        ch = s["characters"]
        assert (ch["min"], ch["max"]) == (lengths.min(), lengths.max())
        assert ch["p50"] == np.percentile(lengths, 50, method="inverted_cdf")
        assert sum(ch["histogram"]["counts"]) == len(texts)
        assert s["stages"][0]["stage"] == stats["stage"]
    dedup = docs_summary(Path(paths.docs))
    assert [st["stage"] for st in dedup["stages"]] == ["dedup", "clean"]
    assert (
        dedup["duplicates"]["duplicates"]
        == json.loads((Path(paths.docs) / ".stats.json").read_text())["duplicates"]
    )


def write_store(directory: Path, texts: list[str], stats: dict | None) -> Path:
    directory.mkdir(parents=True)
    rows = {
        "id": [f"d{i}" for i in range(len(texts))],
        "text": texts,
        "source": ["x"] * len(texts),
        "meta": ["{}"] * len(texts),
    }
    pq.write_table(pa.table(rows, schema=DOCUMENT), directory / "part-00000-of-00001.parquet")
    if stats is not None:
        (directory / ".stats.json").write_text(json.dumps(stats))
    return directory


def test_stats_json_read_defensively(tmp_path) -> None:
    """Keys another stage may add (clusters, near duplicates) are read when present; an
    unknown layout is passed through, not an error."""
    stats = {
        "stage": "dedup",
        "documents_in": 5,
        "documents_out": 3,
        "duplicates": 2,
        "duplicates.near": 1,
        "clusters": 1,
        "largest_clusters": [{"id": "a", "size": 3}],
        "emit_clusters": None,
        "near_settings": {"bands": 9},
        "something_new": {"x": 1},
        "upstream": {
            "stage": "clean",
            "documents_in": 9,
            "documents_out": 5,
            "dropped.too_short": 3,
            "dropped.duplicate_id": 2,
            "dropped.gopher_repetition": 1,
            "dropped.weird": "not a number",
        },
    }
    s = docs_summary(write_store(tmp_path / "docs", ["a", "bb", "ccé"], stats))
    assert s["documents"] == 3 and s["bytes"] == 1 + 2 + 4
    assert s["dropped"] == {"too_short": 3, "duplicate_id": 2, "gopher_repetition": 1}
    assert s["duplicates"] == {
        "duplicates": 2,
        "duplicates.near": 1,
        "clusters": 1,
        "largest_clusters": [{"id": "a", "size": 3}],
    }
    assert "largest_clusters: 3" in render(s)
    assert [(st["stage"], st["documents_out"]) for st in s["stages"]] == [
        ("dedup", 3),
        ("clean", 5),
    ]
    assert s["stats"]["something_new"] == {"x": 1}


def test_document_count_disagreeing_with_stats_is_a_problem(tmp_path) -> None:
    s = docs_summary(write_store(tmp_path / "d", ["a", "b"], {"documents_out": 3}))
    assert s["problems"] == [
        {"file": ".stats.json", "problem": "says 3 documents, the files hold 2"}
    ]
    broken = write_store(tmp_path / "e", ["a"], {"documents_out": 1})
    (broken / "part-00001-of-00002.parquet").write_bytes(b"PAR1 not really")
    s = docs_summary(broken)
    assert s["problems"][0]["file"] == "part-00001-of-00002.parquet"
    assert "cannot be read" in s["problems"][0]["problem"]
    (broken / ".stats.json").write_text("{")
    with pytest.raises(BadInputError, match=r"stats\.json: not valid JSON"):
        docs_summary(broken)


def test_unfinished_store_is_marked_incomplete(tmp_path) -> None:
    s = docs_summary(write_store(tmp_path / "d", ["abc"], None))
    assert not s["complete"] and s["documents"] == 1 and s["stages"] == []


def test_tokenizer_summary(tokenizer_dir, tmp_path) -> None:
    s = tokenizer_summary(tokenizer_dir)
    vocab = json.loads((tokenizer_dir / "tokenizer.json").read_text())["model"]["vocab"]
    specials = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
    ordinary = [t for t in vocab if t not in specials]
    assert s["vocab_kind"] == "wordpiece" and s["vocab_size"] == len(vocab)
    assert s["special_tokens"]["mask"] == {"token": "[MASK]", "id": vocab["[MASK]"]}
    assert s["pieces"]["continuations"] == sum(t.startswith("##") for t in ordinary)
    assert s["pieces"]["word_starts"] + s["pieces"]["continuations"] == len(ordinary)
    assert s["pieces"]["characters"]["max"] == max(len(t.removeprefix("##")) for t in ordinary)
    assert s["vocab_stats"] is None or isinstance(s["vocab_stats"], dict)
    copy = tmp_path / "tok"
    copy.mkdir()
    for f in tokenizer_dir.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    vocab_stats = {"unk_rate": 0.001234567, "held_out": {"tokens_per_word": 1.3}}
    (copy / "vocab_stats.json").write_text(json.dumps(vocab_stats))
    summary = tokenizer_summary(copy)
    assert summary["vocab_stats"] == vocab_stats
    assert "unk_rate: 0.001235" in render(summary)
    assert "held_out.tokens_per_word: 1.3" in render(summary)


def test_detect_kind(shards_dir, tokenizer_dir, tmp_path) -> None:
    assert detect_kind(shards_dir) == "shards"
    assert detect_kind(tokenizer_dir) == "tokenizer"
    assert detect_kind(tokenizer_dir / "tokenizer.json") == "tokenizer"
    with pytest.raises(BadInputError, match="not a document store"):
        detect_kind(tmp_path)
    with pytest.raises(BadInputError, match="no such file"):
        detect_kind(tmp_path / "nope")


def test_an_unfinished_run_is_reported(small_build, tmp_path, capsys) -> None:
    # What kill -9 of a rerun leaves: the last complete store and the new run's staging.
    store = tmp_path / "docs"
    shutil.copytree(small_build[0].docs, store)
    (store / ".staging-0123456789ab").mkdir()
    (store / ".staging-0123456789ab" / "part-00000.parquet").write_bytes(b"half")
    assert main(["inspect", str(store)]) == 0
    out = capsys.readouterr().out
    assert "warning: .staging-0123456789ab: left by a run into this directory that did not" in out
    assert unfinished_runs(tmp_path) == []

    only = tmp_path / "killed-first-run"
    (only / ".staging-0123456789ab").mkdir(parents=True)
    with pytest.raises(BadInputError, match=r"unfinished run: holds only \.staging-0123456789ab"):
        detect_kind(only)
    # What a shard run stopped by a full disk used to leave: a temporary shard, no manifest.
    tmp_only = tmp_path / "full-disk"
    tmp_only.mkdir()
    (tmp_only / ".shard-000000.tar.0123abcd.tmp").write_bytes(b"half")
    with pytest.raises(BadInputError, match=r"an unfinished run: holds only \.shard-000000"):
        detect_kind(tmp_only)


def test_an_output_being_written_is_reported(small_build, tmp_path, capsys) -> None:
    store = tmp_path / "docs"
    shutil.copytree(small_build[0].docs, store)
    with OutputLock(LOCAL, str(store), "dedup"):
        assert main(["inspect", str(store)]) == 0
        out = capsys.readouterr().out
        assert f"`cloze dedup` (PID {os.getpid()} on " in out and "is writing this" in out
        empty = tmp_path / "new"
        with (
            OutputLock(LOCAL, str(empty), "clean"),
            pytest.raises(BadInputError, match=r"new: being written by `cloze clean` \(PID"),
        ):
            detect_kind(empty)
    assert main(["inspect", str(store)]) == 0
    assert "warning" not in capsys.readouterr().out  # released: nothing left
