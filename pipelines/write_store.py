"""Writing document stores: rows -> Parquet part files whose bytes do not depend on the
runner or the number of workers."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq

from clozeworks.corpus.text.readers import (
    RawDocument,
)
from clozeworks.pipelines.plumbing.beamfs import BEAM_FS, FileSystemsDoFn
from clozeworks.pipelines.plumbing.progress import Tally
from clozeworks.pipelines.plumbing.shuffle import Shuffle
from clozeworks.schemas.documents import (
    DOCS_PREFIX,
    DOCUMENT,
)


def to_row(doc: RawDocument) -> dict[str, str]:
    return {"id": doc.id, "text": doc.text, "source": doc.source, "meta": doc.meta}


# Text per part file of `WriteDocumentParts`: a part is held in memory while it is written.
PART_TEXT_BYTES = 32 << 20
# Text per row group: readers hand out row groups as units of work.
ROW_GROUP_TEXT_BYTES = 8 << 20
_ROW = beam.coders.FastPrimitivesCoder()


def parts_for(text_bytes: int) -> int:
    """Part files for about `text_bytes` of text."""
    return max(1, -(-text_bytes // PART_TEXT_BYTES))


def _part_of(row: dict[str, Any], parts: int) -> tuple[int, dict[str, Any]]:
    return zlib.crc32(row["id"].encode("utf-8")) % parts, row


class _WritePart(FileSystemsDoFn):
    """(part, rows) -> the part's Parquet file under `staging`, rows sorted by their
    columns in schema order (the id first)."""

    def __init__(self, staging: str, prefix: str, parts: int, schema: pa.Schema) -> None:
        super().__init__()
        self.staging = staging
        self.prefix = prefix
        self.parts = parts
        self.schema = schema

    def _order(self, row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(row[name] for name in self.schema.names)

    def process(self, item: tuple[int, Iterable[dict[str, Any] | None]]) -> Iterator[str]:
        part, values = item
        rows = sorted((row for row in values if row is not None), key=self._order)
        tally = Tally()
        tally.add(f"written.{self.prefix}", len(rows))
        tally.save()
        name = f"{self.prefix}-{part:05d}-of-{self.parts:05d}.parquet"
        path = BEAM_FS.join(self.staging, name)
        with (
            BEAM_FS.create(path) as f,
            pq.ParquetWriter(f, self.schema, compression="none", use_dictionary=False) as writer,
        ):
            start = size = 0
            for end, row in enumerate(rows, 1):
                size += len(row.get("text", "")) + len(row["id"])
                if size >= ROW_GROUP_TEXT_BYTES or end == len(rows):
                    table = pa.Table.from_pylist(rows[start:end], schema=self.schema)
                    writer.write_table(table)
                    start, size = end, 0
        yield path


class WriteParquetParts(beam.PTransform):
    """Dict rows with an `id` (a PCollection or a tuple of them) -> `parts` Parquet files
    `{prefix}-NNNNN-of-MMMMM.parquet` under a staging directory, the same bytes whichever
    runner and however many workers: a row's part is a hash of its id, and the rows of a
    part are sorted. Costs one grouping through `shuffle`; a part is read and written
    whole, so `parts_for` keeps it to about PART_TEXT_BYTES."""

    def __init__(
        self,
        staging: str,
        parts: int,
        shuffle: Shuffle,
        schema: pa.Schema = DOCUMENT,
        prefix: str = DOCS_PREFIX,
    ) -> None:
        super().__init__()
        self.staging = staging
        self.parts = parts
        self.shuffle = shuffle
        self.schema = schema
        self.prefix = prefix

    def expand(self, rows: Any) -> Any:
        inputs = rows if isinstance(rows, tuple | list) else (rows,)
        keyed = [
            pc | f"KeyByPart{i}" >> beam.Map(_part_of, self.parts) for i, pc in enumerate(inputs)
        ]
        # Every part, so that a part no row hashes to is still written (and empty).
        parts = [(i, None) for i in range(self.parts)]
        every = inputs[0].pipeline | "EveryPart" >> beam.Create(parts)
        write = _WritePart(self.staging, self.prefix, self.parts, self.schema)
        return (
            (*keyed, every)
            | "GroupByPart" >> self.shuffle.group_by_part(self.prefix, self.parts, _ROW)
            | "WritePart" >> beam.ParDo(write)
        )
