"""`cloze dedup`: a document store -> the same store without duplicate documents."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam

from corpus.dedup import choose_kept, exact_key
from pipelines.counters import counter, read_counters
from pipelines.documents_io import ReadDocuments, WriteDocuments, read_store_stats
from pipelines.options import pipeline_options
from pipelines.outputs import commit, new_staging_dir
from schemas.documents import DOCS_GLOB, STATS_FILE
from schemas.errors import UsageError


@dataclass
class DedupConfig:
    input: str
    output: str
    exact: bool = True
    near: bool = False
    threshold: float = 0.8


def _count_in(row: dict[str, Any]) -> dict[str, Any]:
    counter("documents_in").inc()
    return row


def _key_by_text(row: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return exact_key(row["text"]), row


def _keep_one(item: tuple[str, Iterable[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    rows = {row["id"]: row for row in item[1]}
    kept = choose_kept(rows)
    if len(rows) > 1:
        counter("duplicates.exact").inc(len(rows) - 1)
        counter("clusters.exact").inc()
    counter("documents_out").inc()
    yield rows[kept]


class ExactDedup(beam.PTransform):
    """Document rows -> one row per distinct normalized text (the smallest id wins)."""

    def expand(self, rows: Any) -> Any:
        return (
            rows
            | "KeyByTextHash" >> beam.Map(_key_by_text)
            # Each group holds the copies of one text, so no worker sees more than that.
            | "GroupCopies" >> beam.GroupByKey()
            | "KeepSmallestId" >> beam.FlatMap(_keep_one)
        )


def _pass_through(row: dict[str, Any]) -> dict[str, Any]:
    counter("documents_out").inc()
    return row


def run_dedup(config: DedupConfig, beam_argv: Sequence[str] = ()) -> dict[str, Any]:
    """Run deduplication; returns the stats written to `output/stats.json`."""
    if config.near:
        raise UsageError("near-duplicate detection (--near) is not available yet; use --no-near")
    if config.input.rstrip("/") == config.output.rstrip("/"):
        raise UsageError("--output must differ from --input")
    upstream = read_store_stats(config.input)
    staging = new_staging_dir(config.output)
    with beam.Pipeline(options=pipeline_options(beam_argv)) as p:
        rows = p | "Read" >> ReadDocuments(config.input) | "CountIn" >> beam.Map(_count_in)
        if config.exact:
            # One row per distinct text.
            rows = rows | "ExactDedup" >> ExactDedup()
        else:
            rows = rows | "PassThrough" >> beam.Map(_pass_through)
        _ = rows | "Write" >> WriteDocuments(staging)
    counters = read_counters(p.result)
    stats = {
        "stage": "dedup",
        "input": config.input,
        "exact": config.exact,
        "near": config.near,
        "documents_in": counters.get("documents_in", 0),
        "documents_out": counters.get("documents_out", 0),
        "duplicates": counters.get("duplicates.exact", 0),
        **counters,
        "upstream": upstream,
    }
    commit(staging, config.output, DOCS_GLOB, STATS_FILE, stats)
    return stats
