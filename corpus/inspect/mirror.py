"""A remote shard set mirrored whole into the shard cache, so inspect reads it locally."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from clozeworks.corpus.shards.cache import RETRIES, ShardCache, read_remote
from clozeworks.corpus.shards.reader import ShardSpec
from clozeworks.corpus.vocab.files import DIRECTORY_FILES
from clozeworks.schemas.errors import BadInputError, SchemaError
from clozeworks.schemas.manifest import MANIFEST_FILE, TOKENIZER_DIR, Manifest


def mirror(location: str, root: Path | None = None, progress: Any = None) -> Path:
    """Download the shard set at `location` (a URL of a shard directory) whole into its
    cache folder and return the folder, a shard directory that local tools can read.
    Every shard is fetched, whatever the cache's limit (a reader needs all of them)."""
    base = location.rstrip("/")
    try:
        text = read_remote(f"{base}/{MANIFEST_FILE}").decode("utf-8")
        manifest = Manifest.from_json(text, source=f"{base}/{MANIFEST_FILE}")
    except (OSError, UnicodeDecodeError, SchemaError) as err:
        raise BadInputError(f"{base}: no readable {MANIFEST_FILE} ({err})") from None
    cache = ShardCache.for_source(base, root, limit=1 << 62)
    cache.adopt_manifest(text)
    for name in DIRECTORY_FILES:
        with contextlib.suppress(OSError):
            tries = RETRIES if name == "tokenizer.json" else 0  # the others are optional
            data = read_remote(f"{base}/{TOKENIZER_DIR}/{name}", retries=tries)
            cache.keep_file(f"{TOKENIZER_DIR}/{name}", data)
    for info in manifest.shards:
        spec = ShardSpec.from_manifest(manifest, info)
        cache.fetch(f"{base}/{info.name}", spec)
        if progress is not None:
            progress(info.bytes)
    return cache.directory
