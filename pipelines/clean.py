"""`cloze clean`: raw files -> normalized, filtered documents (a document store)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from clozeworks.corpus.text.filters import DocumentFilter, apply_filters, build_filters
from clozeworks.corpus.text.normalize import check_mojibake_support, normalize_text
from clozeworks.corpus.text.readers import (
    DEFAULT_CHUNK_BYTES,
    DEFAULT_MAX_RECORD_BYTES,
    RawDocument,
    Rejected,
    is_compressed,
)
from clozeworks.pipelines.beamfs import BEAM_FS
from clozeworks.pipelines.counters import counter, read_counters
from clozeworks.pipelines.documents_io import (
    INPUT_BYTES,
    ReadRawDocuments,
    WriteParquetParts,
    named_inputs,
    parts_for,
    to_row,
)
from clozeworks.pipelines.options import is_local, pipeline_options, shuffle_for
from clozeworks.pipelines.progress import Bar, pipeline_progress
from clozeworks.pipelines.runner import run_pipeline
from clozeworks.pipelines.shuffle import Shuffle
from clozeworks.pipelines.unique_ids import UniqueIds
from clozeworks.schemas.documents import DOCS_GLOB, DOCS_PREFIX, STATS_FILE
from clozeworks.schemas.errors import BadInputError, UsageError

DROPPED = "dropped"
REJECTS_GLOB = "rejects-*.jsonl.gz"
REJECTS_MARKER = "rejects.json"


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
    fix_mojibake: bool = False
    rejects: str | None = None
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    chunk_bytes: int = DEFAULT_CHUNK_BYTES


class _CleanDocument(beam.DoFn):
    def __init__(self, normal_form: str, filters: Sequence[DocumentFilter], fix: bool) -> None:
        self.normal_form = normal_form
        self.filters = list(filters)
        self.fix = fix
        self.kept = counter("documents_out")
        self.bytes_out = counter("bytes_out")

    def process(self, doc: RawDocument) -> Iterator[Any]:
        text = normalize_text(doc.text, self.normal_form, self.fix)
        result = apply_filters(text, self.filters) if text else None
        if result is None or not result.keep:
            reason = "empty_after_normalize" if result is None else str(result.reason)
            counter(f"dropped.{reason}").inc()
            yield beam.pvalue.TaggedOutput(DROPPED, (reason, doc))
            return
        final = result.text if result.text is not None else text
        if not final:
            counter("dropped.empty_after_filters").inc()
            yield beam.pvalue.TaggedOutput(DROPPED, ("empty_after_filters", doc))
            return
        self.kept.inc()
        self.bytes_out.inc(len(final.encode("utf-8")))
        yield to_row(RawDocument(doc.id, final, doc.source, doc.meta))


class CleanDocuments(beam.PTransform):
    """RawDocument -> document rows (main) and (reason, RawDocument) tagged `dropped`."""

    def __init__(
        self, normal_form: str, filters: Sequence[DocumentFilter], fix_mojibake: bool = False
    ) -> None:
        super().__init__()
        self.normal_form = normal_form
        self.filters = filters
        self.fix_mojibake = fix_mojibake

    def expand(self, docs: Any) -> Any:
        return docs | "NormalizeAndFilter" >> beam.ParDo(
            _CleanDocument(self.normal_form, self.filters, self.fix_mojibake)
        ).with_outputs(DROPPED, main="kept")


def rejected_line(record: Rejected) -> str:
    """A reader rejection as one JSON line of the rejects store."""
    return json.dumps(
        {
            "reason": record.reason,
            "source": record.source,
            "position": record.position,
            "detail": record.detail,
            "sample": record.sample,
        },
        ensure_ascii=False,
    )


def dropped_line(item: tuple[str, RawDocument]) -> str:
    """A document a filter dropped, with its reason and original text, as one JSON line."""
    reason, doc = item
    return json.dumps(
        {"reason": reason, "id": doc.id, "source": doc.source, "text": doc.text},
        ensure_ascii=False,
    )


class WriteRejects(beam.PTransform):
    """JSON lines -> gzipped `rejects-*.jsonl.gz` parts under a staging directory."""

    def __init__(self, staging: str) -> None:
        super().__init__()
        self.staging = staging

    def expand(self, lines: Any) -> Any:
        return lines | "WriteJsonLines" >> beam.io.WriteToText(
            BEAM_FS.join(self.staging, "rejects"),
            file_name_suffix=".jsonl.gz",
            shard_name_template="-SSSSS-of-NNNNN",
        )


def _check(config: CleanConfig, filters: Sequence[DocumentFilter]) -> None:
    if config.fix_mojibake:
        check_mojibake_support()
    for f in filters:
        check = getattr(f, "check", None)
        if check is not None:
            check()
    if config.max_record_bytes < 1:
        raise UsageError("--max-record-bytes must be at least 1")
    if config.rejects and config.rejects.rstrip("/") == config.output.rstrip("/"):
        raise UsageError("--rejects must differ from --output")


def build_clean(
    p: Any,
    config: CleanConfig,
    files: Sequence[str | tuple[str, str]],
    filters: Sequence[DocumentFilter],
    staging: str,
    rejects_staging: str | None,
    shuffle: Shuffle | None = None,
    parts: int = 1,
) -> None:
    """Add the clean stages to pipeline `p` (separate from running it, so tests can check
    what would be sent to a runner). `shuffle` groups the kept documents into `parts`
    files by id (and with ids from the input, keeps one document per id)."""
    shuffle = shuffle or Shuffle()
    # RawDocument; unusable records go to `rejected`, counted by reason.
    raw = p | "ReadRaw" >> ReadRawDocuments(
        files,
        config.fmt,
        config.text_field,
        config.id_field,
        config.doc_sep,
        config.max_record_bytes,
        config.chunk_bytes,
    )
    # Document rows that passed every filter, and (reason, document) that did not.
    cleaned = raw.documents | "Clean" >> CleanDocuments(
        config.normal_form, filters, config.fix_mojibake
    )
    kept, dropped = cleaned.kept, [cleaned.dropped]
    if config.id_field:
        unique = kept | "UniqueIds" >> UniqueIds(shuffle)
        kept = unique.kept
        dropped.append(unique.dropped)
    # Through a grouping by id rather than as bundled: which documents share a file must
    # not depend on how many workers read the inputs.
    _ = kept | "Write" >> WriteParquetParts(staging, parts, shuffle)
    if rejects_staging:
        unread = raw.rejected | "RejectedAsJson" >> beam.Map(rejected_line)
        lines = [
            drops | f"DroppedAsJson{i}" >> beam.Map(dropped_line) for i, drops in enumerate(dropped)
        ]
        _ = (
            (unread, *lines)
            | "AllRejects" >> beam.Flatten()
            | "WriteRejects" >> WriteRejects(rejects_staging)
        )


def run_clean(
    config: CleanConfig, beam_argv: Sequence[str] = (), progress: bool = False
) -> dict[str, Any]:
    """Run the clean pipeline; returns the stats written to `output/stats.json`. With
    `progress`, bars on stderr while it runs on this machine.

    Raises BadInputError for inputs that match nothing or cannot be read, UsageError for
    settings that cannot work; nothing is left in `output` by a failed run.
    """
    try:
        filters = build_filters(config.filters, config.filter_options)
    except (ValueError, TypeError) as err:
        raise UsageError(str(err)) from None
    _check(config, filters)
    files = named_inputs(config.inputs)
    staging = BEAM_FS.new_staging_dir(config.output)
    rejects_staging = BEAM_FS.new_staging_dir(config.rejects) if config.rejects else None
    options = pipeline_options(beam_argv)
    sizes = _input_sizes([path for path, _ in files])
    text_bytes = sum(size * (4 if is_compressed(path) else 1) for path, size in sizes)
    shuffle = shuffle_for(options, BEAM_FS.join(staging, "_shuffle"), text_bytes)
    parts = parts_for(text_bytes)
    bars = [
        Bar(INPUT_BYTES, "read", sum(size for _, size in sizes), "bytes"),
        Bar(f"written.{DOCS_PREFIX}", "written"),
    ]
    try:
        with (
            pipeline_progress(bars, progress and is_local(options)),
            run_pipeline(options) as p,
        ):
            build_clean(p, config, files, filters, staging, rejects_staging, shuffle, parts)
        if shuffle.directory is not None:
            BEAM_FS.remove_tree(shuffle.directory)
        counts = _zero_defaults(read_counters(p.result))
        missing = counts.get("dropped.missing_text", 0)
        if missing and missing == counts["documents_in"]:
            # Not a corpus with bad records: a field name that matches nothing.
            raise BadInputError(
                f"none of the {missing} records has a text field {config.text_field!r} "
                "(set --text-field to the field or column that holds the text)"
            )
    except BaseException:
        BEAM_FS.remove_tree(staging)
        if rejects_staging:
            BEAM_FS.remove_tree(rejects_staging)
        raise
    stats = {
        "stage": "clean",
        "inputs": list(config.inputs),
        "files": len(files),
        "filters": {f.name: dataclasses.asdict(f) for f in filters},  # type: ignore[call-overload]
        "normal_form": config.normal_form,
        "fix_mojibake": config.fix_mojibake,
        **counts,
    }
    if rejects_staging and config.rejects:
        dropped = {k: v for k, v in counts.items() if k.startswith("dropped.")}
        BEAM_FS.commit(rejects_staging, config.rejects, REJECTS_GLOB, REJECTS_MARKER, dropped)
    BEAM_FS.commit(staging, config.output, DOCS_GLOB, STATS_FILE, stats)
    return stats


def _input_sizes(files: Sequence[str]) -> list[tuple[str, int]]:
    """(path, bytes) of each input: the total for progress, and (compressed files counting
    four times their size) about how much text there is, to size the groupings."""
    return [
        (meta.path, meta.size_in_bytes)
        for result in FileSystems.match(list(files))
        for meta in result.metadata_list
    ]


def _zero_defaults(counters: dict[str, int]) -> dict[str, int]:
    base = {"documents_in": 0, "documents_out": 0, "bytes_in": 0, "bytes_out": 0}
    base.update(counters)
    return base
