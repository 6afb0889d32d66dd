"""Reading document stores (the Parquet parts and .stats.json that clean and dedup write)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from clozeworks.corpus.vocab.files import DIRECTORY_FILES, TOKENIZER_FILE
from clozeworks.pipelines.plumbing.beamfs import BEAM_FS, FileSystemsDoFn
from clozeworks.pipelines.plumbing.counters import counter
from clozeworks.pipelines.plumbing.progress import Tally
from clozeworks.schemas.documents import DOCS_GLOB
from clozeworks.schemas.errors import BadInputError
from clozeworks.schemas.sidecars import STATS_FILE, locate
from clozeworks.schemas.stats import StoreStats

# Progress count (pipelines.progress): store rows read.
DOCUMENTS_READ = "documents_read"


def require_documents(directory: str) -> str:
    """The Parquet glob of a finished document store; BadInputError otherwise."""
    # On an object store a "directory" is a prefix with objects under it, never an object.
    if not BEAM_FS.is_directory(directory):
        raise BadInputError(f"{directory}: no such document directory")
    if not BEAM_FS.exists(_stats_path(directory)):
        raise BadInputError(
            f"{directory}: no {STATS_FILE}, so this is not a finished document store "
            "(run `cloze clean` into it, or the run was interrupted)"
        )
    return BEAM_FS.join(directory, DOCS_GLOB)


def read_store_stats(directory: str) -> StoreStats:
    """The .stats.json of a finished document store; BadInputError if it is not one."""
    require_documents(directory)
    path = _stats_path(directory)
    with BEAM_FS.open(path) as f:
        return StoreStats.read(f.read(), path)


def _stats_path(directory: str) -> str:
    return locate(directory, STATS_FILE, BEAM_FS.exists, BEAM_FS.join)


def store_totals(directory: str) -> tuple[int, int]:
    """(documents, approximate text bytes) of a document store, from Parquet footers."""
    files = BEAM_FS.match(require_documents(directory))
    documents = text_bytes = 0
    for path in files:
        meta = _footer(path)
        documents += meta.num_rows
        text_col = meta.schema.names.index("text") if "text" in meta.schema.names else None
        for rg in range(meta.num_row_groups):
            group = meta.row_group(rg)
            if text_col is not None:
                # Plain-encoded strings carry a 4-byte length each.
                col = group.column(text_col)
                text_bytes += max(0, col.total_uncompressed_size - 4 * group.num_rows)
    return documents, text_bytes


def _footer(path: str) -> Any:
    """The Parquet metadata of `path`; BadInputError naming it if it is not Parquet."""
    try:
        with BEAM_FS.open(path) as f:
            return pq.read_metadata(f)
    except Exception as err:
        raise BadInputError(f"{path}: not a readable Parquet file ({err})") from None


class _RowGroupsOf(FileSystemsDoFn):
    """(path, row group) for each row group of one Parquet file, from its footer."""

    def process(self, path: str) -> Iterator[tuple[str, int]]:
        for group in range(_footer(path).num_row_groups):
            yield path, group


class _ReadRowGroup(FileSystemsDoFn):
    def __init__(self, columns: Sequence[str] | None) -> None:
        super().__init__()
        self.columns = list(columns) if columns is not None else None

    def setup(self) -> None:
        super().setup()
        self.tally = Tally()

    def finish_bundle(self) -> None:
        self.tally.save()

    def process(self, task: tuple[str, int]) -> Iterator[Any]:
        path, group = task
        with BEAM_FS.open(path) as f:
            table = pq.ParquetFile(f).read_row_group(group, columns=self.columns)
        counter("read.row_groups").inc()
        self.tally.add(DOCUMENTS_READ, table.num_rows)
        yield table


class ReadDocumentTables(beam.PTransform):
    """A document store -> one pyarrow Table per row group (`columns`, default all).

    Not beam.io.ReadFromParquetBatched: on the DirectRunner its output left the reading
    stage whole, so every row group of the store was in memory at once (1.07 GB of 2.1 at
    the peak of a 400 MB `cloze shard`). Here a worker reads the row groups it is handed
    and the tables go straight on, one at a time, to the DoFns fused after it.
    """

    def __init__(self, directory: str, columns: Sequence[str] | None = None) -> None:
        super().__init__()
        self.files = BEAM_FS.match(require_documents(directory))
        self.columns = columns

    def expand(self, pbegin: Any) -> Any:
        return (
            pbegin
            | "ListFiles" >> beam.Create(self.files)
            | "RowGroups" >> beam.ParDo(_RowGroupsOf())
            # One row group per element; the reshuffle spreads them over workers.
            | "SpreadRowGroups" >> beam.Reshuffle()
            | "ReadRowGroup" >> beam.ParDo(_ReadRowGroup(self.columns))
        )


def _rows(table: Any) -> list[dict[str, Any]]:
    return table.to_pylist()


class ReadDocuments(beam.PTransform):
    """A document store -> dict rows with the `schemas.DOCUMENT` fields."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory

    def expand(self, pbegin: Any) -> Any:
        return (
            pbegin
            | "ReadTables" >> ReadDocumentTables(self.directory)
            | "Rows" >> beam.FlatMap(_rows)
        )


def local_tokenizer(path: str, into: str) -> str:
    """`path` where `load_tokenizer` can read it: as it is on this machine's disk; from an
    object store (`cloze vocab --output gs://...`), its tokenizer files copied into the
    local directory `into` first. BadInputError if there is no tokenizer there."""
    if FileSystems.get_scheme(path) in (None, "file"):
        return path
    names = [n for n in DIRECTORY_FILES if BEAM_FS.exists(BEAM_FS.join(path, n))]
    if TOKENIZER_FILE not in names:
        if BEAM_FS.exists(path) and path.endswith((".json", ".txt")):  # one file given
            names, path = [path.rsplit("/", 1)[1]], path.rsplit("/", 1)[0]
        else:
            raise BadInputError(f"{path}: no {TOKENIZER_FILE} there")
    os.makedirs(into, exist_ok=True)
    for name in names:
        with (
            BEAM_FS.open(BEAM_FS.join(path, name)) as f,
            open(os.path.join(into, name), "wb") as out,
        ):
            out.write(f.read())
    return into
