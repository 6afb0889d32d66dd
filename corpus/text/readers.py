"""Raw input: plan how files are read, open them (plain, .gz, .zst, .bz2, .xz) and turn their
records into documents.

Records that cannot become a document are not errors: they come back as `Rejected` with a
reason the pipeline counts (`bad_json`, `bad_utf8`, `missing_text`, `non_string_text`,
`empty_text`, `too_long`, `bad_id`: an `--id-field` value that is not a string or an
integer, which would otherwise become a Python repr). A file that cannot be opened or
decompressed is an error naming the file.

Large uncompressed `.jsonl` and blank-line `.txt` files are cut into byte ranges read in
parallel (`plan_reads`), the way Hadoop and Beam's text source split: a range owns the records
that *start* inside it and reads its last record past its end. Parquet files are cut at row
groups. Ids stay `{path}#{line}` (1-based line, row, or first line of a block) because every
range is told how many lines come before it (`count_newlines` over the earlier ranges).
Memory is bounded by `max_record_bytes` plus a read buffer: an overlong record is skipped
while it streams past, never held.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import IO, Literal, cast, get_args

import zstandard

from clozeworks.corpus.text.fields import meta_of
from clozeworks.corpus.text.modu import read_modu, require_ijson
from clozeworks.corpus.text.namuwiki import read_namuwiki
from clozeworks.corpus.text.records import (
    DEFAULT_MAX_RECORD_BYTES,
    RawDocument,
    ReadOptions,
    Rejected,
    document,
    lone_surrogate,
    make_id,
    sample,
    too_long,
    whole_file,
)
from clozeworks.corpus.text.tables import read_arrow, read_csv, read_parquet
from clozeworks.corpus.text.web import read_html, read_warc, require_web
from clozeworks.corpus.text.wiki import read_mediawiki, read_mediawiki_streams, require_parser
from clozeworks.corpus.text.zstdframes import FrameCheckingReader
from clozeworks.schemas.errors import BadInputError

# The record types live in corpus/text/records.py; readers of this module find them here too.
__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "RawDocument",
    "ReadOptions",
    "Rejected",
    "make_id",
    "read_parquet",
]

Format = Literal[
    "jsonl",
    "parquet",
    "txt",
    "arrow",
    "csv",
    "tsv",
    "mediawiki",
    "warc",
    "wet",
    "html",
    "modu",
    "cc100",
    "namuwiki",
]
FORMATS: tuple[Format, ...] = get_args(Format)


def _wiki_needs(options: ReadOptions) -> None:
    require_parser()


def _web_needs(options: ReadOptions) -> None:
    require_web(options.extractor)


def _json_stream_needs(options: ReadOptions) -> None:
    require_ijson()


# What a format needs installed beyond the core (an extra): a check that says which.
FORMAT_NEEDS: dict[str, Callable[[ReadOptions], None]] = {
    "mediawiki": _wiki_needs,
    "warc": _web_needs,
    "wet": _web_needs,
    "html": _web_needs,
    "modu": _json_stream_needs,
}
# A .txt file is one document, or one per blank-line-separated block.
DocSep = Literal["file", "blank"]
DOC_SEPS: tuple[DocSep, ...] = get_args(DocSep)
COMPRESSED_SUFFIXES = (".gz", ".zst", ".zstd", ".bz2", ".xz")
# Byte ranges of a large uncompressed file, as Beam's own file sources use (64 MiB).
DEFAULT_CHUNK_BYTES = 64 << 20
_READ_BYTES = 1 << 20


@dataclass(frozen=True)
class ReadTask:
    """One unit of reading: a whole file, a byte range of one, or a run of Parquet row groups.

    `start`/`end` are byte offsets (jsonl, txt) or row-group indexes (parquet); `end` None
    means to the end of the file. `base` is the number of lines (rows) before `start`, or
    None while it is still to be counted.
    """

    path: str
    fmt: str
    start: int = 0
    end: int | None = None
    base: int | None = 0
    # What documents name as their source, and their ids `{name}#{position}` are made of:
    # the path relative to the input it was found under (`expand_inputs`); "" = `path`.
    name: str = ""


def strip_compression(name: str) -> str:
    for suffix in COMPRESSED_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def is_compressed(path: str) -> bool:
    return path.lower().endswith(COMPRESSED_SUFFIXES)


def decompressing(raw: IO[bytes], path: str) -> IO[bytes]:
    """Wrap a binary stream in the decompressor its name asks for.

    Every decompressor here returns at most what is asked of it, so a small file that expands
    enormously (a 200 MB line of one character gzips to 200 KB) never lands in memory whole.
    A compressed file of zero bytes is an error naming it: every format writes a header even
    for no data, so such a file is what a failed download or copy leaves (gzip and zstd
    would read it as empty, bz2 and xz fail with a message that does not say so).
    """
    lower = path.lower()
    if lower.endswith(COMPRESSED_SUFFIXES):
        if not raw.read(1):
            raise BadInputError(f"{path}: empty compressed file (zero bytes; not even a header)")
        raw.seek(0)
    if lower.endswith(".gz"):
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw))
    if lower.endswith((".zst", ".zstd")):
        checked = cast(IO[bytes], FrameCheckingReader(raw))
        reader = zstandard.ZstdDecompressor().stream_reader(checked, read_across_frames=True)
        return cast(IO[bytes], io.BufferedReader(reader, buffer_size=_READ_BYTES))
    if lower.endswith(".bz2"):
        return cast(IO[bytes], bz2.BZ2File(raw))
    if lower.endswith(".xz"):
        return cast(IO[bytes], lzma.LZMAFile(raw))
    return raw


def plan_reads(
    path: str,
    fmt: str,
    size: int,
    doc_sep: str = "file",
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> list[ReadTask]:
    """How to read one jsonl or txt file: whole, or in byte ranges of about `chunk_bytes`.

    Compressed files and whole-file text documents cannot be split. Ranges of a split file
    have `base=None`: their line offsets come from `count_newlines` over the earlier ranges.
    """
    if fmt not in ("jsonl", "txt", "cc100"):
        raise ValueError(f"plan_reads handles jsonl, txt and cc100, not {fmt!r}")
    blocks = fmt == "cc100" or doc_sep == "blank"
    splittable = not is_compressed(path) and (fmt == "jsonl" or blocks)
    if not splittable or size <= chunk_bytes:
        return [ReadTask(path, fmt)]
    return [ReadTask(path, fmt, s, e, None) for s, e in _byte_ranges(size, chunk_bytes)]


def plan_stream_ranges(path: str, size: int, chunk_bytes: int) -> list[ReadTask]:
    """ReadTasks of about `chunk_bytes` of XML over a bz2 MediaWiki dump (one for a small one):
    each reads the bz2 streams that start in its range (corpus/text/wiki.py)."""
    # A range is counted in compressed bytes and wikitext XML packs about 5x in bz2 (4.7x
    # on bench/wiki's dump), so a task reads about `chunk_bytes` of XML, as other formats do.
    chunk_bytes = max(1, chunk_bytes // 5)
    if size <= chunk_bytes:
        return [ReadTask(path, "mediawiki")]
    return [ReadTask(path, "mediawiki", s, e) for s, e in _byte_ranges(size, chunk_bytes)]


def plan_page_ranges(path: str, size: int, chunk_bytes: int) -> list[ReadTask]:
    """ReadTasks of about `chunk_bytes` over an uncompressed NamuWiki dump: each reads the
    pages that start in its range (corpus/text/namuwiki.py); a compressed one is one task."""
    if is_compressed(path) or size <= chunk_bytes:
        return [ReadTask(path, "namuwiki")]
    return [ReadTask(path, "namuwiki", s, e) for s, e in _byte_ranges(size, chunk_bytes)]


def _byte_ranges(size: int, chunk_bytes: int) -> list[tuple[int, int | None]]:
    """[start, end) ranges of `chunk_bytes` over `size` bytes; the last one's end is None
    (to the end of the file)."""
    return [
        (s, s + chunk_bytes if s + chunk_bytes < size else None)
        for s in range(0, size, chunk_bytes)
    ]


def plan_parquet_reads(
    path: str, group_rows: Sequence[int], group_bytes: Sequence[int], chunk_bytes: int
) -> list[ReadTask]:
    """Consecutive row groups of about `chunk_bytes` per task, each knowing the rows before it."""
    tasks: list[ReadTask] = []
    start, rows_before, rows, size = 0, 0, 0, 0
    for i, (n, b) in enumerate(zip(group_rows, group_bytes, strict=True)):
        if i > start and size + b > chunk_bytes:
            tasks.append(ReadTask(path, "parquet", start, i, rows_before))
            start, rows_before, rows, size = i, rows_before + rows, 0, 0
        rows += n
        size += b
    tasks.append(ReadTask(path, "parquet", start, None, rows_before))
    return tasks


def count_newlines(stream: IO[bytes], start: int, end: int | None) -> int:
    """Number of b"\\n" in bytes [start, end) of a seekable stream (one pass, constant memory)."""
    stream.seek(start)
    left = None if end is None else end - start
    total = 0
    while left is None or left > 0:
        block = stream.read(_READ_BYTES if left is None else min(_READ_BYTES, left))
        if not block:
            break
        total += block.count(b"\n")
        if left is not None:
            left -= len(block)
    return total


def with_bases(tasks: Sequence[ReadTask], counts: Sequence[int]) -> list[ReadTask]:
    """The ranges of one file in order, each told the lines before it (`counts[i]` = newlines
    in range i)."""
    out, before = [], 0
    for task, n in sorted(zip(tasks, counts, strict=True), key=_task_start):
        out.append(replace(task, base=before))
        before += n
    return out


def _task_start(item: tuple[ReadTask, int]) -> int:
    return item[0].start


# --- reading -------------------------------------------------------------------------------


def read_task(
    task: ReadTask, stream: IO[bytes], options: ReadOptions
) -> Iterator[RawDocument | Rejected]:
    """The records of `task` from `stream` (decompressed; seekable when the task is a range)."""
    if task.base is None:
        raise ValueError(f"{task.path}: range {task.start} has not been numbered")
    source = task.name or task.path
    options = options.for_source(source)
    if task.fmt == "jsonl":
        return read_jsonl(stream, source, options, task.start, task.end, task.base)
    # CC-100: a paragraph a line, a blank line after each document.
    if task.fmt == "cc100" or (task.fmt == "txt" and options.doc_sep == "blank"):
        return read_txt_blocks(stream, source, options, task.start, task.end, task.base)
    if task.fmt == "txt":
        return read_txt_file(stream, source, options)
    if task.fmt == "parquet":
        return read_parquet(stream, source, options, task.start, task.end, task.base)
    if task.fmt == "arrow":
        return read_arrow(stream, source, options)
    if task.fmt == "mediawiki" and task.path.lower().endswith(".bz2"):
        return read_mediawiki_streams(stream, source, options, task.start, task.end)
    if task.fmt == "mediawiki":
        return read_mediawiki(stream, source, options)
    if task.fmt in ("warc", "wet"):
        return read_warc(stream, source, options)
    if task.fmt == "html":
        return read_html(stream, source, options)
    if task.fmt == "modu":
        return read_modu(stream, source, options)
    if task.fmt == "namuwiki":
        return read_namuwiki(stream, source, options, task.start, task.end)
    if task.fmt in ("csv", "tsv"):
        return read_csv(stream, source, options, "\t" if task.fmt == "tsv" else ",")
    raise ValueError(f"unknown input format {task.fmt!r}; expected one of {', '.join(FORMATS)}")


def iter_lines(
    stream: IO[bytes], offset: int, max_bytes: int
) -> Iterator[tuple[int, bytes | None]]:
    """(offset, line without its b"\\n") for each line from the stream's current position,
    which is byte `offset`; the line is None when longer than `max_bytes` (skipped unread)."""
    pieces: list[bytes] = []
    pending = 0  # bytes of the unfinished line seen so far
    skipping = False  # the unfinished line is already too long
    while True:
        chunk = stream.read(_READ_BYTES)
        if not chunk:
            break
        cut = chunk.find(b"\n")
        if cut < 0:
            pending += len(chunk)
            if not skipping and pending > max_bytes:
                skipping, pieces = True, []
            elif not skipping:
                pieces.append(chunk)
            continue
        head = chunk[:cut]
        if skipping or pending + len(head) > max_bytes:
            yield offset, None
        else:
            yield offset, b"".join([*pieces, head]) if pieces else head
        offset += pending + cut + 1
        lines = chunk[cut + 1 :].split(b"\n")
        tail = lines.pop()
        for line in lines:
            yield offset, (line if len(line) <= max_bytes else None)
            offset += len(line) + 1
        pending, skipping = len(tail), len(tail) > max_bytes
        pieces = [tail] if tail and not skipping else []
    if pending:
        yield offset, None if skipping else b"".join(pieces)


def _first_line(stream: IO[bytes], start: int, base: int) -> tuple[int, int] | None:
    """(offset, line number) of the first line starting at or after `start`, if any."""
    if start == 0:
        return 0, base + 1
    stream.seek(start - 1)
    if stream.read(1) == b"\n":
        return start, base + 1
    # `start` is inside a line that belongs to the range before; skip it without holding it.
    pos = start
    while True:
        block = stream.read(_READ_BYTES)
        if not block:
            return None
        cut = block.find(b"\n")
        if cut >= 0:
            return pos + cut + 1, base + 2
        pos += len(block)


def _lines_from(
    stream: IO[bytes], first: tuple[int, int], end: int | None, max_bytes: int
) -> Iterator[tuple[int, int, bytes | None]]:
    """(line number, offset, line) for every line from `first` that starts before `end`."""
    offset, lineno = first
    if offset:  # a range; a whole read streams from the start and may not seek
        stream.seek(offset)
    for at, line in iter_lines(stream, offset, max_bytes):
        if end is not None and at >= end:
            return
        yield lineno, at, line
        lineno += 1


MAX_FIELDS_SHOWN = 8


def read_jsonl(
    stream: IO[bytes],
    source: str,
    options: ReadOptions | None = None,
    start: int = 0,
    end: int | None = None,
    base: int = 0,
) -> Iterator[RawDocument | Rejected]:
    """One JSON object per line; positions are 1-based line numbers. Blank lines are skipped."""
    options = options or ReadOptions()
    first = _first_line(stream, start, base)
    if first is None:
        return
    # A file none of whose objects has the text field is not a corpus with bad records but
    # a field named wrong (a `content` file among `text` ones): said, not dropped in silence.
    objects = with_text = 0
    fields: set[str] = set()
    for lineno, _, raw in _lines_from(stream, first, end, options.max_record_bytes):
        if raw is None:
            yield too_long(source, lineno, options.max_record_bytes)
            continue
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            yield Rejected("bad_utf8", source, lineno, str(err), sample(raw))
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            yield Rejected("bad_json", source, lineno, err.msg, sample(raw))
            continue
        except RecursionError:
            yield Rejected("bad_json", source, lineno, "nested too deeply", sample(raw))
            continue
        if not isinstance(record, dict):
            yield Rejected("bad_json", source, lineno, "not an object", sample(raw))
            continue
        objects += 1
        if options.text_field not in record:
            if len(fields) < MAX_FIELDS_SHOWN:
                fields.update(list(record)[:MAX_FIELDS_SHOWN])
            yield Rejected("missing_text", source, lineno, options.text_field, sample(raw))
            continue
        with_text += 1
        record_id = record.get(options.id_field) if options.id_field else None
        meta = meta_of(record, options.meta_fields) if options.meta_fields else "{}"
        doc = document(record[options.text_field], source, lineno, record_id, raw, meta)
        # Only a JSON escape ("\ud800") can make a lone surrogate: valid JSON, not text.
        # Decoded UTF-8 (txt, Parquet) never holds one, so only such lines are encoded.
        if b"\\u" in raw and lone_surrogate(doc):
            doc = Rejected("bad_utf8", source, lineno, "lone surrogate", sample(raw))
        yield doc
    if objects and not with_text:
        where = source if start == 0 and end is None else f"{source} (from line {first[1]})"
        shown = ", ".join(sorted(fields)[:MAX_FIELDS_SHOWN]) or "none"
        raise BadInputError(
            f"{where}: none of the {objects} records has a text field {options.text_field!r} "
            f"(their fields: {shown}); set --text-field to the field that holds the text, "
            f"or --fields '{source}:text=FIELD' for this file alone"
        )


def read_txt_file(
    stream: IO[bytes], source: str, options: ReadOptions | None = None
) -> Iterator[RawDocument | Rejected]:
    """A whole file is one document (position 1); past `max_record_bytes` it is `too_long`."""
    data = whole_file(stream, source, options or ReadOptions())
    yield data if isinstance(data, Rejected) else document(data, source, 1, None, data)


def read_txt_blocks(
    stream: IO[bytes],
    source: str,
    options: ReadOptions | None = None,
    start: int = 0,
    end: int | None = None,
    base: int = 0,
) -> Iterator[RawDocument | Rejected]:
    """Each blank-line-separated block is a document, positioned at its first line."""
    options = options or ReadOptions()
    limit = options.max_record_bytes
    first = _first_line(stream, start, base)
    if first is None:
        return
    block: list[bytes] = []
    block_start, size, overlong = 0, 0, False
    foreign = not _line_before_blank(stream, first[0])
    for lineno, offset, raw in _lines_from(stream, first, None, limit):
        blank = raw is not None and not raw.strip()
        if blank:
            if block or overlong:
                yield _block(block, source, block_start, overlong, limit)
            block, size, overlong, foreign = [], 0, False, False
            continue
        if foreign:  # the rest of a block that started in the range before
            continue
        if not block and not overlong:
            if end is not None and offset >= end:
                return
            block_start = lineno
        size += (len(raw) if raw is not None else limit) + 1
        if raw is None or size > limit:
            overlong, block = True, []
        elif not overlong:
            block.append(raw)
    if block or overlong:
        yield _block(block, source, block_start, overlong, limit)


def _line_before_blank(stream: IO[bytes], offset: int) -> bool:
    """Whether the line ending just before `offset` (a line start) is blank or absent."""
    pos = offset - 1  # the b"\n" ending the previous line
    while pos > 0:
        lo = max(0, pos - 4096)
        stream.seek(lo)
        window = stream.read(pos - lo)
        for byte in reversed(window):
            if byte == 0x0A:
                return True
            if byte not in b" \t\r\x0b\x0c":
                return False
        pos = lo
    return True


def _block(
    lines: list[bytes], source: str, start: int, overlong: bool, limit: int
) -> RawDocument | Rejected:
    if overlong:
        return too_long(source, start, limit)
    raw = b"\n".join(lines)
    return document(raw, source, start, None, raw)


def parquet_layout(stream: IO[bytes], source: str) -> tuple[list[int], list[int]]:
    """Rows and compressed bytes of each row group of a Parquet file (from its footer)."""
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(stream).metadata
    except Exception as err:
        raise BadInputError(f"{source}: not a readable Parquet file ({err})") from None
    rows = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    sizes = [meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)]
    return rows, sizes
