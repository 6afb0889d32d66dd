"""What a path holds, and summaries of document stores and tokenizers (docs/inspect.md).

Shard sets are summarized by `corpus.inspect.shards`, training runs by `trainer.runinfo`.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from clozeworks.corpus.inspect.languages import (
    ScriptTally,
    asked_languages,
    identified_languages,
    language_warnings,
    stage_records,
)
from clozeworks.corpus.inspect.stats import Histogram, log2_edges
from clozeworks.corpus.locks import LOCK_FILE, read_holder
from clozeworks.corpus.outputs import LOCAL
from clozeworks.corpus.vocab.train import TOKENIZER_FILE, load_tokenizer, word_start_table
from clozeworks.schemas.documents import DOCS_GLOB
from clozeworks.schemas.errors import BadInputError
from clozeworks.schemas.sidecars import MANIFEST_FILE, STATS_FILE, local
from clozeworks.schemas.validate import loads

KINDS = ("shards", "docs", "tokenizer", "run", "transformers")
# What `save_pretrained` writes beside config.json: a directory with one is a model.
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")
VOCAB_STATS_FILE = "vocab_stats.json"
# .stats.json keys read as drop reasons / duplicate figures (see docs/inspect.md).
DROPPED_PREFIX = "dropped."
DUPLICATE_WORDS = ("duplicate", "cluster")
STAGE_FIGURES = ("documents_in", "documents_out", "bytes_in", "bytes_out")
TOP_SOURCES = 20
# The first documents of the store, cut to SAMPLE_CHARS, for a reader to look at.
SAMPLES = 3
SAMPLE_CHARS = 600


def detect_kind(path: Path) -> str:
    """Which stage produced `path`; BadInputError naming it when none did (or unfinished)."""
    if not path.exists():
        raise BadInputError(f"{path}: no such file or directory")
    if path.is_dir():
        if (path / "finetune.json").is_file():
            return "finetuned"
        if (path / "multitask.json").is_file():
            return "multitask"
        if local(path, MANIFEST_FILE).is_file() or list(path.glob("shard-*.tar")):
            return "shards"
        if local(path, STATS_FILE).is_file() or list(path.glob(DOCS_GLOB)):
            return "docs"
        if (path / "config.json").is_file() and any((path / f).is_file() for f in WEIGHT_FILES):
            return "transformers"
        if (path / TOKENIZER_FILE).is_file() or (path / "vocab.txt").is_file():
            return "tokenizer"
        if (path / "config.json").is_file() and (path / "metrics.jsonl").exists():
            return "run"
    elif path.name in (TOKENIZER_FILE, "vocab.txt"):
        return "tokenizer"
    if path.is_dir():
        holder = read_holder(LOCAL, str(path))
        if holder is not None:
            raise BadInputError(
                f"{path}: being written by {holder.said()}; inspect it when that run ends"
            )
        left = _leftovers(path)
        if left:
            raise BadInputError(
                f"{path}: an unfinished run: holds only {left[0]} of a run that did not finish "
                "(killed or failed); run the stage again"
            )
    raise BadInputError(
        f"{path}: not a document store, tokenizer, shard directory, training run, "
        "fine-tuned model or transformers model directory"
    )


def unfinished_runs(path: Path) -> list[str]:
    """A warning per trace of a run into `path` that has not committed: one writing it
    now (its lock held), or one that did not finish (its staging directory, temporary
    files or lock file left behind)."""
    if not path.is_dir():
        return []
    holder = read_holder(LOCAL, str(path))
    if holder is not None:
        return [
            f"{LOCK_FILE}: {holder.said()} is writing this directory now; what is shown may "
            "change under it"
        ]
    return [
        f"{name}: left by a run into this directory that did not finish (killed or failed); "
        "what is shown is the last complete one, and the next run removes it"
        for name in _leftovers(path)
    ]


def _leftovers(path: Path) -> list[str]:
    """What an unfinished run leaves in its output: staging directories, hidden temporary
    files (`.NAME.<hex>.tmp`), its lock file."""
    return sorted(
        p.name
        for p in path.iterdir()
        if p.name.startswith(".staging-")
        or (p.name.startswith(".") and p.name.endswith(".tmp"))
        or p.name == LOCK_FILE
    )


def docs_summary(directory: Path) -> dict[str, Any]:
    """Documents and their lengths (characters and UTF-8 bytes), counted from the Parquet
    files, beside what the stage's `.stats.json` says: drop reasons, duplicates, clusters.

    A part file that cannot be read, or a document count that disagrees with
    `.stats.json`'s `documents_out`, is listed in `problems` ({"file", "problem"}).
    """
    stats_path = local(directory, STATS_FILE)
    stats = _read_stats(stats_path)
    files = sorted(directory.glob(DOCS_GLOB))
    chars, utf8 = Histogram(), Histogram()
    problems: list[dict[str, str]] = []
    sources: Counter[str] = Counter()
    samples: list[dict[str, str]] = []
    scripts = ScriptTally()
    for f in files:
        try:
            for batch in pq.ParquetFile(f).iter_batches(columns=["id", "text", "source"]):
                text = batch.column("text")
                chars.add(_lengths(pc.utf8_length(text)))
                utf8.add(_lengths(pc.binary_length(text)))
                sources.update(_source_counts(batch.column("source")))
                scripts.add(text.to_pylist())
                for row in batch.slice(0, SAMPLES - len(samples)).to_pylist():
                    samples.append({**row, "text": row["text"][:SAMPLE_CHARS]})
        except (pa.ArrowException, OSError, KeyError) as err:
            problems.append({"file": f.name, "problem": f"cannot be read ({err})"})
    chain = _stage_chain(stats)
    documents = chars.count
    expected = stats.get("documents_out") if stats else None
    if isinstance(expected, int) and not problems and expected != documents:
        problems.append(
            {
                "file": stats_path.name,
                "problem": f"says {expected} documents, the files hold {documents}",
            }
        )
    dropped: dict[str, int] = {}
    for stage in chain:
        for reason, count in stage["dropped"].items():
            dropped[reason] = dropped.get(reason, 0) + count
    duplicates: dict[str, Any] = {}
    for stage in chain:
        for key, value in stage["duplicates"].items():
            duplicates.setdefault(key, value)
    edges = log2_edges(chars.summary()["max"] or 1)
    languages = identified_languages(stats)
    asked = asked_languages(stats)
    return {
        "kind": "docs",
        "path": str(directory),
        "complete": stats is not None,
        "files": len(files),
        "documents": documents,
        "characters": {
            **chars.summary(),
            "histogram": {"edges": edges.tolist(), "counts": chars.binned(edges)},
        },
        "bytes": utf8.total,
        "utf8_bytes": utf8.summary(),
        "dropped": dropped,
        "duplicates": duplicates,
        "stages": chain,
        "stats": stats,
        "sources": {
            "distinct": len(sources),
            "top": _top_sources(sources),
            "directories": _top_directories(sources),
        },
        "languages": languages,
        "languages_asked": asked,
        "scripts": scripts.summary(),
        "samples": samples,
        "problems": problems,
        "warnings": language_warnings(languages, asked),
    }


def _source_counts(column: Any) -> dict[str, int]:
    counts = pc.value_counts(column).to_pylist()
    return {str(item["values"]): int(item["counts"]) for item in counts}


def _top_sources(sources: Counter[str]) -> list[dict[str, Any]]:
    """The sources with the most documents, most first, ties by name."""
    ranked = sorted(sources.items(), key=lambda kv: (-kv[1], kv[0]))
    return [{"source": s, "documents": n} for s, n in ranked[:TOP_SOURCES]]


def _top_directories(sources: Counter[str]) -> list[dict[str, Any]]:
    """Documents and files per directory of the sources, most documents first: a corpus of
    thousands of files reads by its parts (wiki/, books/), not by its largest files."""
    documents: Counter[str] = Counter()
    files: Counter[str] = Counter()
    for source, n in sources.items():
        directory = source.rsplit("/", 1)[0] if "/" in source else "."
        documents[directory] += n
        files[directory] += 1
    ranked = sorted(documents.items(), key=lambda kv: (-kv[1], kv[0]))
    return [{"directory": d, "files": files[d], "documents": n} for d, n in ranked[:TOP_SOURCES]]


def _lengths(array: Any) -> np.ndarray:
    """Lengths from a pyarrow integer array; nulls (not allowed by the schema) count as 0."""
    return np.asarray(array.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)


def _read_stats(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise BadInputError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise BadInputError(f"{path}: expected a JSON object")
    return data


def _stage_chain(stats: dict[str, Any] | None) -> list[dict[str, Any]]:
    """This stage's figures, then its upstreams' (dedup's .stats.json nests clean's, or
    several cleans' in order under `upstreams`)."""
    return [
        {
            "stage": stats.get("stage"),
            **{k: stats.get(k) for k in STAGE_FIGURES},
            "dropped": {
                k.removeprefix(DROPPED_PREFIX): v
                for k, v in stats.items()
                if k.startswith(DROPPED_PREFIX) and isinstance(v, int)
            },
            "duplicates": {
                k: v
                for k, v in stats.items()
                if any(word in k for word in DUPLICATE_WORDS)
                and not k.startswith(DROPPED_PREFIX)
                and isinstance(v, int | float | list)
                and not isinstance(v, bool)
            },
        }
        for stats in stage_records(stats)
    ]


def tokenizer_summary(path: Path) -> dict[str, Any]:
    """Kind, size, special tokens and piece statistics of a tokenizer, with the
    `vocab_stats.json` that `cloze vocab` writes beside it (as written, or None)."""
    info = load_tokenizer(path)
    directory = path if path.is_dir() else path.parent
    starts = np.array(word_start_table(info.tokenizer, info.special), dtype=bool)
    special = np.zeros(len(starts), dtype=bool)
    special[[i for i in info.all_special_ids if i < len(special)]] = True
    pieces = info.tokenizer.get_vocab(with_added_tokens=True)
    piece_chars = Histogram()
    piece_chars.add(
        np.fromiter(
            (len(_strip_marker(t, info.special)) for t, i in pieces.items() if not special[i]),
            dtype=np.int64,
        )
    )
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
        "pieces": {
            "word_starts": int((starts & ~special).sum()),
            "continuations": int((~starts & ~special).sum()),
            "characters": piece_chars.summary(),
        },
        "vocab_stats": _read_optional_json(directory / VOCAB_STATS_FILE),
    }


def transformers_summary(path: Path) -> dict[str, Any]:
    """A transformers model directory (`cloze export`'s output): the class its config.json
    names, the architecture, the task and label names of a fine-tuned export, the
    tokenizer beside it, and an ELECTRA generator exported into `generator/`."""
    config = _read_optional_json(path / "config.json")
    if not isinstance(config, dict):
        raise BadInputError(f"{path / 'config.json'}: expected a JSON object")
    classes = config.get("architectures") or []
    id2label = config.get("id2label") or {}
    labels = [id2label[k] for k in sorted(id2label, key=int)] if _int_keys(id2label) else []
    head = next((c for c in classes if "For" in c), "")
    finetuned = any(head.endswith(f"For{t}") for t in FINETUNED_HEADS)
    tokenizer_config = _read_optional_json(path / "tokenizer_config.json") or {}
    generator = path / "generator" / "config.json"
    return {
        "kind": "transformers",
        "path": str(path),
        "class": classes[0] if classes else None,
        "model_type": config.get("model_type"),
        "model": {
            "num_layers": config.get("num_hidden_layers", config.get("n_layer")),
            "hidden_size": config.get("hidden_size", config.get("n_embd", config.get("d_model"))),
            "vocab_size": config.get("vocab_size"),
        },
        "finetuned": finetuned,
        "task": config.get("finetuning_task") if finetuned else None,
        "problem_type": config.get("problem_type") if finetuned else None,
        "labels": labels if finetuned else [],
        "tokenizer": tokenizer_config.get("tokenizer_class")
        if (path / TOKENIZER_FILE).is_file()
        else None,
        "generator": (_read_optional_json(generator) or {}).get("architectures", [None])[0]
        if generator.is_file()
        else None,
        "files": sorted(f.name for f in path.iterdir() if f.is_file()),
    }


# The heads `cloze export` writes for a fine-tuned model (trainer/finetune/export.py).
FINETUNED_HEADS = (
    "SequenceClassification",
    "TokenClassification",
    "QuestionAnswering",
    "MultipleChoice",
)


def _int_keys(mapping: dict[str, Any]) -> bool:
    return all(isinstance(k, str) and k.lstrip("-").isdigit() for k in mapping)


def _strip_marker(token: str, special: Any) -> str:
    for prefix in (special.continuation_prefix, special.word_start_prefix):
        if prefix and token.startswith(prefix):
            return token[len(prefix) :]
    return token


def _read_optional_json(path: Path) -> Any:
    if not path.is_file():
        return None
    try:
        return loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise BadInputError(f"{path}: not valid JSON ({err})") from None
