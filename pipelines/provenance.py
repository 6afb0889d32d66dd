"""The provenance table of a shard set (corpus/shards/provenance.py), written beside the
shards: one Parquet part per part of the store, its rows in the store's order, so the
bytes do not depend on the runner or the number of workers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
import pyarrow.parquet as pq

from clozeworks.corpus.shards.provenance import PROVENANCE, provenance_table
from clozeworks.pipelines.plumbing.beamfs import BEAM_FS, FileSystemsDoFn
from clozeworks.pipelines.plumbing.counters import counter
from clozeworks.pipelines.read_store import require_documents


class _WriteProvenancePart(FileSystemsDoFn):
    """A store part -> its provenance part in `directory`, a row group at a time."""

    def __init__(self, directory: str, seed: int) -> None:
        super().__init__()
        self.directory = directory
        self.seed = seed

    def process(self, path: str) -> Iterator[str]:
        target = BEAM_FS.join(self.directory, path.rsplit("/", 1)[-1])
        with BEAM_FS.open(path) as f, BEAM_FS.create(target) as out:
            store = pq.ParquetFile(f)
            with pq.ParquetWriter(out, PROVENANCE, compression="zstd") as writer:
                for group in range(store.num_row_groups):
                    table = store.read_row_group(group, columns=["id", "source", "meta"])
                    writer.write_table(provenance_table(table, self.seed))
                    counter("provenance.documents").inc(table.num_rows)
        yield target


class WriteProvenance(beam.PTransform):
    """A document store -> its provenance parts in `directory` (a staging directory)."""

    def __init__(self, store: str, directory: str, seed: int) -> None:
        super().__init__()
        self.files = BEAM_FS.match(require_documents(store))
        self.directory = directory
        self.seed = seed

    def expand(self, pbegin: Any) -> Any:
        return (
            pbegin
            | "ListParts" >> beam.Create(self.files)
            | "SpreadParts" >> beam.Reshuffle()
            | "WriteParts" >> beam.ParDo(_WriteProvenancePart(self.directory, self.seed))
        )
