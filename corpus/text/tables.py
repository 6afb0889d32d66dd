"""Tabular inputs: Parquet, Arrow IPC (what `datasets.save_to_disk` writes) and CSV / TSV.
Each names its text, id and meta columns as the options say; a value becomes a document by
the same rule as a JSON record's (`corpus.text.records.document`); positions are 1-based rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO, Any

from clozeworks.corpus.text.fields import meta_of
from clozeworks.corpus.text.records import (
    RawDocument,
    ReadOptions,
    Rejected,
    document,
    exceeds,
    too_long,
    values,
)
from clozeworks.schemas.errors import BadInputError


def read_parquet(
    stream: IO[bytes],
    source: str,
    options: ReadOptions | None = None,
    start: int = 0,
    end: int | None = None,
    base: int = 0,
) -> Iterator[RawDocument | Rejected]:
    """Rows of row groups [start, end), a small batch at a time; positions are 1-based rows."""
    import pyarrow.parquet as pq

    options = options or ReadOptions()
    try:
        pf = pq.ParquetFile(stream)
    except Exception as err:
        raise BadInputError(f"{source}: not a readable Parquet file ({err})") from None
    columns = check_columns(pf.schema_arrow, source, options)
    stop = pf.num_row_groups if end is None else end
    if start >= stop:
        return
    batches = pf.iter_batches(batch_size=256, row_groups=range(start, stop), columns=columns)
    yield from batch_documents(batches, source, options, base)


def read_arrow(
    stream: IO[bytes], source: str, options: ReadOptions | None = None
) -> Iterator[RawDocument | Rejected]:
    """An Arrow IPC file or stream (`datasets.save_to_disk` writes the stream format), a
    record batch at a time; positions are 1-based rows."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    options = options or ReadOptions()
    head = stream.read(6)
    try:
        if head == b"ARROW1" and stream.seekable():
            stream.seek(0)
            reader: Any = ipc.open_file(stream)
            batches: Iterable[Any] = (reader.get_batch(i) for i in range(reader.num_record_batches))
        else:
            reader = ipc.open_stream(pa.input_stream(_Prefixed(head, stream)))
            batches = reader
        columns = check_columns(reader.schema, source, options)
    except (pa.ArrowInvalid, OSError, UnicodeDecodeError) as err:  # a column name not UTF-8
        raise BadInputError(f"{source}: not a readable Arrow IPC file ({err})") from None
    try:
        yield from batch_documents((_whole(b.select(columns)) for b in batches), source, options, 0)
    except (pa.ArrowInvalid, OSError) as err:  # a batch cut short or damaged, found mid-file
        raise BadInputError(f"{source}: cannot read past a damaged record batch ({err})") from None


def _whole(batch: Any) -> Any:
    """`batch`, its offsets and lengths checked: an IPC reader takes them on trust, and a
    damaged one would crash the conversion to Python strings (ArrowInvalid instead)."""
    import pyarrow as pa

    batch.validate(full=True)
    for i in range(batch.num_columns):
        try:
            batch.column(i)
        except KeyError:  # a type id pyarrow has no array class for: damaged metadata
            raise pa.ArrowInvalid(f"column {i} has a type no reader knows") from None
    return batch


class _Prefixed:
    """A stream whose first bytes were already read (to tell Arrow's two formats apart)."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self.head, self.rest, self.closed = head, rest, False

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            data, self.head = self.head + self.rest.read(), b""
            return data
        if self.head:
            data, self.head = self.head[:size], self.head[size:]
            return data + (self.rest.read(size - len(data)) if size > len(data) else b"")
        return self.rest.read(size)

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


def check_columns(schema: Any, source: str, options: ReadOptions) -> list[str]:
    """The columns to read (text, id, the meta columns the file has); BadInputError naming
    the file for a text or id column that is missing, doubled or nested."""
    import pyarrow as pa

    names = schema.names
    for field in (options.text_field, options.id_field):
        if field and field not in names:
            raise BadInputError(f"{source}: no column {field!r} (columns: {', '.join(names)})")
        if field and names.count(field) > 1:
            raise BadInputError(f"{source}: {names.count(field)} columns are named {field!r}")
        if field and pa.types.is_nested(schema.field(field).type):
            kind = schema.field(field).type
            raise BadInputError(f"{source}: column {field!r} holds {kind}, not single values")
    columns = [options.text_field] + ([options.id_field] if options.id_field else [])
    # Meta columns the file has, each read once (a meta field may be the id or the text).
    return columns + [f for f in options.meta_fields if f in names and f not in columns]


def batch_documents(
    batches: Iterable[Any], source: str, options: ReadOptions, base: int
) -> Iterator[RawDocument | Rejected]:
    """Record batches holding `check_columns`' columns -> documents, rows numbered from
    `base` + 1."""
    position = base
    for batch in batches:
        names = batch.schema.names
        meta_columns = [f for f in options.meta_fields if f in names]
        texts = values(batch.column(options.text_field))
        ids = values(batch.column(options.id_field)) if options.id_field else None
        metas = {f: values(batch.column(f)) for f in meta_columns}
        for i, text in enumerate(texts):
            position += 1
            if isinstance(text, str | bytes) and exceeds(text, options.max_record_bytes):
                yield too_long(source, position, options.max_record_bytes)
                continue
            meta = meta_of({f: v[i] for f, v in metas.items()}, meta_columns) if metas else "{}"
            yield document(text, source, position, None if ids is None else ids[i], meta=meta)


def read_csv(
    stream: IO[bytes], source: str, options: ReadOptions | None = None, delimiter: str = ","
) -> Iterator[RawDocument | Rejected]:
    """A CSV (or, with a tab, TSV) file with a header row, read by Python's csv module
    (quoted fields may hold commas and line breaks); positions are 1-based data rows. A row
    the parser refuses (a field past `max_record_bytes`, a stray quote, a quoted field
    still open at the end of the file) is rejected as `bad_csv` and reading goes on at the
    next line. The parser is strict: a lenient one glues `"x"y` into `xy` and takes a
    quote that never closes as one field holding the rest of the file, without a word."""
    import csv
    import io

    options = options or ReadOptions()
    csv.field_size_limit(max(csv.field_size_limit(), options.max_record_bytes))
    text = io.TextIOWrapper(stream, encoding="utf-8", newline="")
    rows = csv.reader(text, delimiter=delimiter, strict=True)
    try:
        header = next(rows, None)
    except (csv.Error, UnicodeDecodeError) as err:
        raise BadInputError(f"{source}: not a readable CSV header ({err})") from None
    if not header:
        return
    for field in (options.text_field, options.id_field):
        if field and field not in header:
            raise BadInputError(f"{source}: no column {field!r} (columns: {', '.join(header)})")
    at = {name: header.index(name) for name in dict.fromkeys(header)}
    text_at, id_at = at[options.text_field], at.get(options.id_field or "")
    meta_at = {f: at[f] for f in options.meta_fields if f in at}
    position = 0
    while True:
        position += 1
        try:
            row = next(rows)
        except StopIteration:
            return
        except csv.Error as err:
            yield Rejected("bad_csv", source, position, str(err))
            continue
        except UnicodeDecodeError as err:
            where = f"{source} (row {position})"
            raise BadInputError(f"{where}: not UTF-8 ({err.reason})") from None
        value = row[text_at] if text_at < len(row) else None
        if value is not None and exceeds(value, options.max_record_bytes):
            yield too_long(source, position, options.max_record_bytes)
            continue
        record_id = row[id_at] if id_at is not None and id_at < len(row) else None
        picked = {f: row[i] for f, i in meta_at.items() if i < len(row)}
        meta = meta_of(picked, list(picked)) if picked else "{}"
        yield document(value, source, position, record_id, meta=meta)
