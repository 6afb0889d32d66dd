"""`cloze clean`: raw files -> normalized, filtered documents (a document store)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam

from corpus.filters import DocumentFilter, apply_filters, build_filters
from corpus.normalize import normalize_text
from corpus.readers import RawDocument
from pipelines.counters import counter, read_counters
from pipelines.documents_io import ReadRawDocuments, WriteDocuments, expand_inputs, to_row
from pipelines.options import pipeline_options
from pipelines.outputs import commit, new_staging_dir
from schemas.documents import DOCS_GLOB, STATS_FILE

DROPPED = "dropped"


@dataclass
class CleanConfig:
    inputs: Sequence[str]
    output: str
    fmt: str | None = None
    text_field: str = "text"
    id_field: str | None = None
    doc_sep: str = "file"
    normal_form: str = "NFC"
    filters: Sequence[str] = ("length",)
    filter_options: dict[str, dict[str, Any]] = field(default_factory=dict)


class _CleanDocument(beam.DoFn):
    def __init__(self, normal_form: str, filters: Sequence[DocumentFilter]) -> None:
        self.normal_form = normal_form
        self.filters = list(filters)
        self.kept = counter("documents_out")
        self.bytes_out = counter("bytes_out")

    def process(self, doc: RawDocument) -> Iterator[Any]:
        text = normalize_text(doc.text, self.normal_form)
        result = apply_filters(text, self.filters) if text else None
        if result is None or not result.keep:
            reason = "empty_after_normalize" if result is None else result.reason
            counter(f"dropped.{reason}").inc()
            yield beam.pvalue.TaggedOutput(DROPPED, (reason, doc))
            return
        final = result.text if result.text is not None else text
        self.kept.inc()
        self.bytes_out.inc(len(final.encode("utf-8")))
        yield to_row(RawDocument(doc.id, final, doc.source, doc.meta))


class CleanDocuments(beam.PTransform):
    """RawDocument -> document rows (main) and (reason, RawDocument) tagged `dropped`."""

    def __init__(self, normal_form: str, filters: Sequence[DocumentFilter]) -> None:
        super().__init__()
        self.normal_form = normal_form
        self.filters = filters

    def expand(self, docs: Any) -> Any:
        return docs | "NormalizeAndFilter" >> beam.ParDo(
            _CleanDocument(self.normal_form, self.filters)
        ).with_outputs(DROPPED, main="kept")


def run_clean(config: CleanConfig, beam_argv: Sequence[str] = ()) -> dict[str, Any]:
    """Run the clean pipeline; returns the stats written to `output/stats.json`."""
    files = expand_inputs(config.inputs)
    filters = build_filters(config.filters, config.filter_options)
    staging = new_staging_dir(config.output)
    with beam.Pipeline(options=pipeline_options(beam_argv)) as p:
        # RawDocument; rejected records are counted inside the reader.
        raw = p | "ReadRaw" >> ReadRawDocuments(
            files, config.fmt, config.text_field, config.id_field, config.doc_sep
        )
        # Document rows that passed every filter.
        cleaned = raw.documents | "Clean" >> CleanDocuments(config.normal_form, filters)
        _ = cleaned.kept | "Write" >> WriteDocuments(staging)
    stats = {
        "stage": "clean",
        "inputs": list(config.inputs),
        "files": len(files),
        "filters": list(config.filters),
        "normal_form": config.normal_form,
        **_zero_defaults(read_counters(p.result)),
    }
    commit(staging, config.output, DOCS_GLOB, STATS_FILE, stats)
    return stats


def _zero_defaults(counters: dict[str, int]) -> dict[str, int]:
    base = {"documents_in": 0, "documents_out": 0, "bytes_in": 0, "bytes_out": 0}
    base.update(counters)
    return base
