"""Reading raw inputs and document stores, writing document stores."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from corpus.readers import RawDocument, Rejected, decompressing, detect_format, reader_for
from pipelines.counters import counter
from pipelines.outputs import join
from schemas.documents import DOCS_GLOB, DOCS_SHARD_TEMPLATE, DOCS_SUFFIX, DOCUMENT, STATS_FILE
from schemas.errors import BadInputError

REJECTED = "rejected"


def expand_inputs(patterns: Sequence[str]) -> list[str]:
    """Files named by paths, globs or directories (recursively), sorted, hidden files skipped.

    BadInputError naming the pattern when it matches nothing.
    """
    files: list[str] = []
    for pattern in patterns:
        if any(ch in pattern for ch in "*?["):
            matched = _match(pattern)
        else:
            # A directory (local or an object-store prefix) is read recursively.
            matched = _match(join(pattern.rstrip("/"), "**")) or _match(pattern)
        matched = [m for m in matched if not _hidden(m) and not os.path.isdir(m)]
        if not matched:
            raise BadInputError(f"{pattern}: no such file or directory (or nothing in it)")
        files.extend(matched)
    return sorted(set(files))


def _match(pattern: str) -> list[str]:
    try:
        return [m.path for m in FileSystems.match([pattern])[0].metadata_list]
    except Exception as err:
        raise BadInputError(f"{pattern}: cannot list input ({err})") from None


def _hidden(path: str) -> bool:
    return path.replace("\\", "/").rsplit("/", 1)[-1].startswith((".", "_"))


class _ReadFile(beam.DoFn):
    def __init__(
        self, fmt: str | None, text_field: str, id_field: str | None, doc_sep: str
    ) -> None:
        self.fmt = fmt
        self.text_field = text_field
        self.id_field = id_field
        self.doc_sep = doc_sep
        self.docs_in = counter("documents_in")
        self.bytes_in = counter("bytes_in")

    def process(self, path: str) -> Iterator[Any]:
        read = reader_for(
            self.fmt or detect_format(path), self.text_field, self.id_field, self.doc_sep
        )
        try:
            raw = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
        except Exception as err:
            raise BadInputError(f"{path}: cannot open ({err})") from None
        with raw, decompressing(raw, path) as stream:
            for record in read(stream, path):
                self.docs_in.inc()
                if isinstance(record, Rejected):
                    counter(f"dropped.{record.reason}").inc()
                    yield beam.pvalue.TaggedOutput(REJECTED, record)
                else:
                    self.bytes_in.inc(len(record.text.encode("utf-8")))
                    yield record


class ReadRawDocuments(beam.PTransform):
    """Raw input files -> RawDocument (main) and Rejected (tagged `rejected`)."""

    def __init__(
        self,
        files: Sequence[str],
        fmt: str | None = None,
        text_field: str = "text",
        id_field: str | None = None,
        doc_sep: str = "file",
    ) -> None:
        super().__init__()
        self.files = list(files)
        self.fmt = fmt
        self.text_field = text_field
        self.id_field = id_field
        self.doc_sep = doc_sep

    def expand(self, pbegin: Any) -> Any:
        return (
            pbegin
            | "ListFiles" >> beam.Create(self.files)
            # One file per element; the reshuffle spreads files over workers.
            | "SpreadFiles" >> beam.Reshuffle()
            | "ReadRecords"
            >> beam.ParDo(
                _ReadFile(self.fmt, self.text_field, self.id_field, self.doc_sep)
            ).with_outputs(REJECTED, main="documents")
        )


def require_documents(directory: str) -> str:
    """The Parquet glob of a finished document store; BadInputError otherwise."""
    if not FileSystems.exists(directory):
        raise BadInputError(f"{directory}: no such document directory")
    if not FileSystems.exists(join(directory, STATS_FILE)):
        raise BadInputError(
            f"{directory}: no {STATS_FILE}, so this is not a finished document store "
            "(run `cloze clean` into it, or the run was interrupted)"
        )
    return join(directory, DOCS_GLOB)


def read_store_stats(directory: str) -> dict[str, Any]:
    """The stats.json of a finished document store; BadInputError if it is not one."""
    require_documents(directory)
    with FileSystems.open(join(directory, STATS_FILE)) as f:
        try:
            stats = json.loads(f.read().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise BadInputError(f"{join(directory, STATS_FILE)}: not valid JSON ({err})") from None
    if not isinstance(stats, dict):
        raise BadInputError(f"{join(directory, STATS_FILE)}: expected a JSON object")
    return stats


class ReadDocuments(beam.PTransform):
    """A document store -> dict rows with the `schemas.DOCUMENT` fields."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.pattern = require_documents(directory)

    def expand(self, pbegin: Any) -> Any:
        return pbegin | "ReadParquet" >> beam.io.ReadFromParquet(self.pattern)


def to_row(doc: RawDocument) -> dict[str, str]:
    return {"id": doc.id, "text": doc.text, "source": doc.source, "meta": doc.meta}


class WriteDocuments(beam.PTransform):
    """Dict rows -> Parquet part files under a staging directory (see pipelines.outputs)."""

    def __init__(self, staging: str) -> None:
        super().__init__()
        self.staging = staging

    def expand(self, rows: Any) -> Any:
        return rows | "WriteParquet" >> beam.io.WriteToParquet(
            join(self.staging, "part"),
            schema=DOCUMENT,
            file_name_suffix=DOCS_SUFFIX,
            shard_name_template=DOCS_SHARD_TEMPLATE,
        )
