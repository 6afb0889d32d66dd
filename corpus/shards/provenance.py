"""Which documents a sequence was made from (`cloze shard --provenance`).

Every block then has `docs.npy` (uint64) and `doc_offsets.npy` (int64, n + 1): sequence i
holds tokens of the documents keyed `docs[doc_offsets[i]:doc_offsets[i + 1]]`, in the order
its tokens come (a packed FULL-SENTENCES sequence may hold several; a pair holds its own
document and, for a random B, the one B came from). A key is the document's shard key
(`corpus.shards.keys.string_key(seed, id)`): eight bytes a reference, so the meta of a
document is stored once, not once per sequence. The table beside the shards,
`.provenance/part-*.parquet`, maps each key to the document's id, source and `meta` (the
fields `cloze clean --meta-fields` kept): one part per part of the store, in its order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from clozeworks.corpus.shards import keys as rk
from clozeworks.schemas.sidecars import PROVENANCE_DIR

PROVENANCE = pa.schema(
    [
        pa.field("key", pa.uint64(), nullable=False),
        pa.field("id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("meta", pa.string(), nullable=False),
    ]
)
PROVENANCE_GLOB = "part-*.parquet"


def provenance_table(table: pa.Table, seed: int) -> pa.Table:
    """A store's rows (id, source, meta) as provenance rows, each with its shard key."""
    ids = table.column("id").to_pylist()
    keys = pa.array(rk.string_keys(seed, ids), type=pa.uint64())
    columns = [keys, table.column("id"), table.column("source"), table.column("meta")]
    return pa.Table.from_arrays(columns, schema=PROVENANCE)


def read_provenance(directory: str | Path) -> dict[int, dict[str, Any]]:
    """key -> {id, source, meta (a dict)} for a local shard set written with provenance;
    {} for one without. Holds every document's id and meta: for inspecting and tracing,
    not for a training loop."""
    out: dict[int, dict[str, Any]] = {}
    for path in sorted((Path(directory) / PROVENANCE_DIR).glob(PROVENANCE_GLOB)):
        for row in pq.read_table(path).to_pylist():
            out[row["key"]] = {
                "id": row["id"],
                "source": row["source"],
                "meta": json.loads(row["meta"]),
            }
    return out


def documents_of(
    docs: np.ndarray, doc_offsets: np.ndarray, table: dict[int, dict[str, Any]]
) -> Iterator[list[dict[str, Any]]]:
    """Per sequence, its documents' rows from `read_provenance`'s table."""
    for lo, hi in zip(doc_offsets[:-1].tolist(), doc_offsets[1:].tolist(), strict=True):
        yield [table[int(k)] for k in docs[lo:hi]]
