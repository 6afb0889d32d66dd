"""Raw input: find files, open them (plain, .gz, .zst) and turn their records into documents.

Records that cannot become a document are not errors: they come back as `Rejected` with a
reason the pipeline counts (`bad_json`, `bad_utf8`, `missing_text`, `non_string_text`,
`empty_text`). A file that cannot be opened at all is an error naming the file.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any, cast

import zstandard

FORMATS = ("jsonl", "parquet", "txt")
DOC_SEPS = ("file", "blank")


@dataclass(frozen=True)
class RawDocument:
    id: str
    text: str
    source: str
    meta: str = "{}"


@dataclass(frozen=True)
class Rejected:
    reason: str
    source: str
    position: int
    detail: str = ""


def detect_format(path: str) -> str:
    """The record format implied by a file name, ignoring a .gz/.zst suffix."""
    name = path.lower()
    for suffix in (".gz", ".zst", ".zstd"):
        name = name.removesuffix(suffix)
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    return "txt"


def decompressing(raw: IO[bytes], path: str) -> IO[bytes]:
    """Wrap a binary stream in the decompressor its name asks for (streaming, bounded memory)."""
    lower = path.lower()
    if lower.endswith(".gz"):
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw))
    if lower.endswith((".zst", ".zstd")):
        # The zstd reader has read() but no line iteration; buffering adds it.
        reader = zstandard.ZstdDecompressor().stream_reader(raw)
        return cast(IO[bytes], io.BufferedReader(reader, buffer_size=1 << 20))
    return raw


def make_id(source: str, position: int) -> str:
    """Stable id from where a record came from: the same on every rerun of the same input."""
    return f"{source}#{position}"


def _decode(line: bytes) -> str | None:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _document(
    value: Any, source: str, position: int, record_id: Any, meta: dict[str, Any]
) -> RawDocument | Rejected:
    if value is None:
        return Rejected("missing_text", source, position)
    if not isinstance(value, str):
        return Rejected("non_string_text", source, position, type(value).__name__)
    if not value.strip():
        return Rejected("empty_text", source, position)
    doc_id = make_id(source, position) if record_id is None else str(record_id)
    return RawDocument(doc_id, value, source, json.dumps(meta, sort_keys=True) if meta else "{}")


def read_jsonl(
    stream: IO[bytes], source: str, text_field: str = "text", id_field: str | None = None
) -> Iterator[RawDocument | Rejected]:
    """One JSON object per line; positions are 1-based line numbers."""
    for lineno, raw_line in enumerate(stream, start=1):
        if not raw_line.strip():
            continue
        line = _decode(raw_line)
        if line is None:
            yield Rejected("bad_utf8", source, lineno)
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            yield Rejected("bad_json", source, lineno, err.msg)
            continue
        if not isinstance(record, dict):
            yield Rejected("bad_json", source, lineno, "not an object")
            continue
        if text_field not in record:
            yield Rejected("missing_text", source, lineno)
            continue
        record_id = record.get(id_field) if id_field else None
        yield _document(record.get(text_field), source, lineno, record_id, {})


def read_txt(
    stream: IO[bytes], source: str, doc_sep: str = "file"
) -> Iterator[RawDocument | Rejected]:
    """A whole file is one document, or (`blank`) each blank-line-separated block is."""
    if doc_sep == "file":
        data = stream.read()
        text = _decode(data)
        yield (
            Rejected("bad_utf8", source, 1)
            if text is None
            else _document(text, source, 1, None, {})
        )
        return
    block: list[bytes] = []
    start = 1
    for lineno, raw_line in enumerate(stream, start=1):
        if raw_line.strip():
            if not block:
                start = lineno
            block.append(raw_line)
            continue
        if block:
            yield _txt_block(block, source, start)
            block = []
    if block:
        yield _txt_block(block, source, start)


def _txt_block(lines: list[bytes], source: str, start: int) -> RawDocument | Rejected:
    text = _decode(b"".join(lines))
    if text is None:
        return Rejected("bad_utf8", source, start)
    return _document(text.rstrip("\n"), source, start, None, {})


def read_parquet(
    stream: IO[bytes], source: str, text_field: str = "text", id_field: str | None = None
) -> Iterator[RawDocument | Rejected]:
    """Rows of a Parquet file, a row group at a time; positions are 1-based row numbers."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(stream)
    if text_field not in pf.schema_arrow.names:
        raise ValueError(f"{source}: no column {text_field!r} (columns: {pf.schema_arrow.names})")
    columns = [text_field] + ([id_field] if id_field else [])
    position = 0
    for batch in pf.iter_batches(columns=columns):
        texts = batch.column(text_field).to_pylist()
        ids = batch.column(id_field).to_pylist() if id_field else [None] * len(texts)
        for text, record_id in zip(texts, ids, strict=True):
            position += 1
            yield _document(text, source, position, record_id, {})


def reader_for(
    fmt: str, text_field: str, id_field: str | None, doc_sep: str
) -> Callable[[IO[bytes], str], Iterator[RawDocument | Rejected]]:
    """A function (stream, source) -> records for format `fmt`."""
    if fmt == "jsonl":
        return lambda s, src: read_jsonl(s, src, text_field, id_field)
    if fmt == "parquet":
        return lambda s, src: read_parquet(_seekable(s), src, text_field, id_field)
    if fmt == "txt":
        return lambda s, src: read_txt(s, src, doc_sep)
    raise ValueError(f"unknown input format {fmt!r}; expected one of {', '.join(FORMATS)}")


def _seekable(stream: IO[bytes]) -> IO[bytes]:
    # Parquet needs random access to its footer; a compressed stream has none.
    return stream if stream.seekable() else io.BytesIO(stream.read())
