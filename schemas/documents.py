"""The document store: Parquet files with one row per document."""

from __future__ import annotations

import pyarrow as pa

DOCUMENT = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        # A JSON object as text, so Parquet files from different inputs share one schema.
        pa.field("meta", pa.string(), nullable=False),
    ]
)

DOCUMENT_FIELDS = tuple(DOCUMENT.names)

# File names inside a document directory. `.stats.json` (schemas.sidecars) is written
# last: a directory without it is an interrupted run, not a document store.
DOCS_GLOB = "part-*.parquet"
DOCS_PREFIX = "part"
DOCS_SUFFIX = ".parquet"
