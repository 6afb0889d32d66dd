"""A remote shard set mirrored whole into the shard cache, so inspect reads it locally."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from clozeworks.corpus.shards.cache import RETRIES, ShardCache, read_first, read_remote
from clozeworks.corpus.shards.reader import ShardSpec
from clozeworks.corpus.vocab.files import DIRECTORY_FILES
from clozeworks.schemas.errors import BadInputError, SchemaError
from clozeworks.schemas.manifest import Manifest
from clozeworks.schemas.sidecars import MANIFEST_FILE, TOKENIZER_DIR, names_of


def mirror(location: str, root: Path | None = None, progress: Any = None) -> Path:
    """Download the shard set at `location` (a URL of a shard directory) whole into its
    cache folder and return the folder, a shard directory that local tools can read.
    Every shard is fetched, whatever the cache's limit (a reader needs all of them)."""
    base = location.rstrip("/")
    manifests = [f"{base}/{name}" for name in names_of(MANIFEST_FILE)]
    try:
        data, era = read_first(manifests)
        text = data.decode("utf-8")
        manifest = Manifest.from_json(text, source=manifests[era])
    except (OSError, UnicodeDecodeError, SchemaError) as err:
        raise BadInputError(f"{base}: no readable {MANIFEST_FILE} ({err})") from None
    cache = ShardCache.for_source(base, root, limit=1 << 62)
    cache.adopt_manifest(text)
    for name in DIRECTORY_FILES:
        with contextlib.suppress(OSError):
            tries = RETRIES if name == "tokenizer.json" else 0  # the others are optional
            data = read_remote(f"{base}/{names_of(TOKENIZER_DIR)[era]}/{name}", retries=tries)
            cache.keep_file(f"{TOKENIZER_DIR}/{name}", data)
    for info in manifest.shards:
        spec = ShardSpec.from_manifest(manifest, info)
        cache.fetch(f"{base}/{info.name}", spec)
        if progress is not None:
            progress(info.bytes)
    return cache.directory
