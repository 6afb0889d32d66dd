"""What is inside a stage's output: summaries of document stores, tokenizers and shard sets.

Everything streams: a shard set is read one block at a time, so memory does not grow with
the number of shards.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from corpus.shardio import ShardFormatError, file_sha256, iter_blocks
from corpus.vocab import TOKENIZER_FILE, load_tokenizer
from schemas.documents import DOCS_GLOB, STATS_FILE
from schemas.errors import BadInputError
from schemas.manifest import MANIFEST_FILE, TOKENIZER_DIR, Manifest, read_manifest

KINDS = ("shards", "docs", "tokenizer", "run")


def detect_kind(path: Path) -> str:
    """Which stage produced `path`; BadInputError naming it when none did (or unfinished)."""
    if not path.exists():
        raise BadInputError(f"{path}: no such file or directory")
    if path.is_dir():
        if (path / MANIFEST_FILE).is_file() or list(path.glob("shard-*.tar")):
            return "shards"
        if (path / STATS_FILE).is_file() or list(path.glob(DOCS_GLOB)):
            return "docs"
        if (path / TOKENIZER_FILE).is_file() or (path / "vocab.txt").is_file():
            return "tokenizer"
        if (path / "config.json").is_file() and (path / "metrics.jsonl").exists():
            return "run"
    elif path.name in (TOKENIZER_FILE, "vocab.txt"):
        return "tokenizer"
    raise BadInputError(f"{path}: not a document store, tokenizer, shard directory or training run")


@dataclass
class LengthStats:
    """Streaming length statistics with an exact histogram over integer lengths."""

    counts: dict[int, int] = field(default_factory=dict)

    def add(self, lengths: np.ndarray) -> None:
        values, counts = np.unique(lengths, return_counts=True)
        for v, c in zip(values.tolist(), counts.tolist(), strict=True):
            self.counts[v] = self.counts.get(v, 0) + c

    def summary(self) -> dict[str, Any]:
        if not self.counts:
            return {"count": 0}
        keys = np.array(sorted(self.counts))
        weights = np.array([self.counts[k] for k in keys])
        total = int(weights.sum())
        cdf = np.cumsum(weights) / total

        def quantile(q: float) -> int:
            return int(keys[np.searchsorted(cdf, q)])

        return {
            "count": total,
            "min": int(keys[0]),
            "mean": float((keys * weights).sum() / total),
            "p50": quantile(0.5),
            "p95": quantile(0.95),
            "max": int(keys[-1]),
        }


def shard_summary(directory: Path, verify: bool = False) -> dict[str, Any]:
    """Totals, lengths and (with `verify`) integrity of a shard set.

    `problems` lists every damaged shard as {"shard", "problem"}; it is empty when all is
    well. Without `verify`, only the manifest's figures and file sizes are checked.
    """
    manifest = read_manifest(directory)
    problems: list[dict[str, str]] = []
    lengths = LengthStats()
    blocks = sequences = tokens = 0
    per_shard = []
    for shard in manifest.shards:
        path = directory / shard.name
        state = "unchecked"
        if not path.is_file():
            problems.append({"shard": shard.name, "problem": "file is missing"})
            state = "missing"
        elif path.stat().st_size != shard.bytes:
            problems.append(
                {
                    "shard": shard.name,
                    "problem": f"size {path.stat().st_size} bytes, manifest says {shard.bytes}",
                }
            )
            state = "wrong size"
        elif verify:
            state, read = _verify_shard(path, shard.sha256, shard.sequences, problems)
            if state == "ok":
                blocks += read.blocks
                sequences += read.sequences
                tokens += read.tokens
                for length, n in read.lengths.counts.items():
                    lengths.counts[length] = lengths.counts.get(length, 0) + n
        per_shard.append({**shard.__dict__, "state": state})
    out: dict[str, Any] = {
        "kind": "shards",
        "path": str(directory),
        "mode": manifest.mode,
        "max_seq_len": manifest.max_seq_len,
        "vocab_size": manifest.vocab_size,
        "vocab_kind": manifest.vocab_kind,
        "premask": None if manifest.premask is None else manifest.premask.to_dict(),
        "shards": len(manifest.shards),
        "blocks": sum(s.blocks for s in manifest.shards),
        "sequences": manifest.sequences,
        "tokens": manifest.tokens,
        "bytes": manifest.bytes,
        "bytes_per_token": manifest.bytes / max(1, manifest.tokens),
        "per_shard": per_shard,
        "problems": problems,
        "verified": verify,
    }
    if verify:
        out["sequence_length"] = lengths.summary()
        out["read"] = {"blocks": blocks, "sequences": sequences, "tokens": tokens}
    return out


@dataclass
class _ShardRead:
    blocks: int = 0
    sequences: int = 0
    tokens: int = 0
    lengths: LengthStats = field(default_factory=LengthStats)


def _verify_shard(
    path: Path, sha256: str, expected: int, problems: list[dict[str, str]]
) -> tuple[str, _ShardRead]:
    """Check one shard's checksum, then decode every block once, counting as it goes."""
    read = _ShardRead()
    if file_sha256(path) != sha256:
        problems.append({"shard": path.name, "problem": "sha256 does not match the manifest"})
        return "checksum mismatch", read
    try:
        for _, block in iter_blocks(path):
            read.blocks += 1
            read.sequences += len(block)
            read.tokens += block.num_tokens
            read.lengths.add(np.diff(block.offsets))
    except ShardFormatError as err:
        problems.append({"shard": path.name, "problem": str(err)})
        return "undecodable", read
    if read.sequences != expected:
        problems.append(
            {"shard": path.name, "problem": f"{read.sequences} sequences, manifest says {expected}"}
        )
        return "wrong count", read
    return "ok", read


def decode_examples(directory: Path, count: int) -> list[dict[str, Any]]:
    """The first `count` sequences of a shard set as text, special tokens visible."""
    manifest: Manifest = read_manifest(directory)
    info = load_tokenizer(directory / TOKENIZER_DIR)
    out: list[dict[str, Any]] = []
    for shard in manifest.shards:
        for key, block in iter_blocks(directory / shard.name):
            for i in range(len(block)):
                if len(out) >= count:
                    return out
                ids = block.sequence(i).tolist()
                example: dict[str, Any] = {
                    "block": key,
                    "index": i,
                    "length": len(ids),
                    "text": info.tokenizer.decode(ids, skip_special_tokens=False),
                }
                if block.segments is not None:
                    example["segment_a"] = int(block.segments[i])
                if block.labels is not None:
                    example["label"] = int(block.labels[i])
                out.append(example)
    return out


def docs_summary(directory: Path) -> dict[str, Any]:
    """Counts and text lengths of a document store, and the stage's stats.json."""
    stats_path = directory / STATS_FILE
    stats = json.loads(stats_path.read_text(encoding="utf-8")) if stats_path.is_file() else None
    files = sorted(directory.glob(DOCS_GLOB))
    lengths = LengthStats()
    documents = 0
    for f in files:
        pf = pq.ParquetFile(f)
        for batch in pf.iter_batches(columns=["text"]):
            texts = batch.column("text").to_pylist()
            documents += len(texts)
            lengths.add(np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts)))
    drops = {
        k.removeprefix("dropped."): v for k, v in (stats or {}).items() if k.startswith("dropped.")
    }
    return {
        "kind": "docs",
        "path": str(directory),
        "complete": stats is not None,
        "files": len(files),
        "documents": documents,
        "characters": lengths.summary(),
        "dropped": drops,
        "stats": stats,
    }


def tokenizer_summary(path: Path) -> dict[str, Any]:
    info = load_tokenizer(path)
    vocab_stats = path / "vocab_stats.json" if path.is_dir() else None
    return {
        "kind": "tokenizer",
        "path": str(path),
        "vocab_kind": info.kind,
        "vocab_size": info.vocab_size,
        "special_tokens": {
            role: {"token": tok, "id": info.special_ids[role]}
            for role, tok in info.special.roles().items()
        },
        "sha256": info.sha256,
        "vocab_stats": json.loads(vocab_stats.read_text())
        if vocab_stats and vocab_stats.is_file()
        else None,
    }


def has_tokenizer_copy(directory: Path) -> bool:
    return (directory / TOKENIZER_DIR).is_dir()
