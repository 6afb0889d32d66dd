"""Every Beam verb through Beam's portability layer (the path Dataflow Runner v2, Flink and
Spark take), here with the embedded job server: the same bytes as the DirectRunner's."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

from clozeworks.cli import main
from clozeworks.corpus.text.demo import iter_docstrings
from tests.conftest import write_jsonl

PORTABLE = ["--runner", "PortableRunner", "--job_endpoint", "embed"]
PORTABLE += ["--environment_type", "LOOPBACK"]


def _chain(raw: Path, out: Path, beam: list[str]) -> None:
    clean, docs, tok, shards = (str(out / name) for name in ("clean", "docs", "tok", "shards"))
    steps = [
        ["clean", "--input", str(raw), "--output", clean],
        ["dedup", "--near", "--input", clean, "--output", docs],
        ["vocab", "--input", docs, "--output", tok, "--kind", "wordpiece", "--vocab-size", "600"],
        ["shard", "--input", docs, "--tokenizer", tok, "--output", shards, "--mode", "nsp"],
    ]
    for step in steps:
        assert main([*step, *beam]) == 0, step


def _digest(root: Path) -> dict[str, str]:
    """sha256 of every output file; of the JSON files that record their input's path, the
    rest of them with the path replaced (it differs between the two runs' directories)."""
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        data = path.read_bytes()
        if path.name in (".stats.json", "vocab_stats.json"):
            data = data.replace(str(root).encode(), b"ROOT")
        out[rel] = hashlib.sha256(data).hexdigest()
    return out


def test_portable_runner_writes_what_the_direct_runner_writes(tmp_path: Path) -> None:
    docs = [{"text": d["text"]} for d in itertools.islice(iter_docstrings(min_chars=200), 400)]
    docs += docs[:40]  # exact duplicates for dedup to find
    raw = write_jsonl(tmp_path / "raw" / "a.jsonl", docs)
    _chain(raw.parent, tmp_path / "direct", [])
    _chain(raw.parent, tmp_path / "portable", PORTABLE)
    direct = _digest(tmp_path / "direct")
    assert "shards/shard-000000.tar" in direct and "docs/.stats.json" in direct
    assert _digest(tmp_path / "portable") == direct
