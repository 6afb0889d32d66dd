"""Output directories that are never half written.

A stage writes its files under `DIR/.staging-<run>/`; only when the pipeline has finished
does `commit` move them into place and write the marker file (`stats.json` for documents)
last. Works on any Beam filesystem (local, gs://, s3://).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from apache_beam.io.filesystems import FileSystems


def join(*parts: str) -> str:
    return FileSystems.join(*parts)


def new_staging_dir(output: str) -> str:
    staging = join(output, f".staging-{uuid.uuid4().hex[:12]}")
    FileSystems.mkdirs(staging)
    return staging


def _matched(pattern: str) -> list[str]:
    try:
        return [m.path for m in FileSystems.match([pattern])[0].metadata_list]
    except Exception:  # a missing directory matches nothing
        return []


def commit(staging: str, output: str, pattern: str, marker: str, marker_data: Any) -> list[str]:
    """Replace `output`'s files matching `pattern` with the staged ones, then write `marker`.

    The old marker is removed first, so an interrupted commit leaves a directory that
    readers refuse instead of a mix of old and new files that looks complete.
    """
    marker_path = join(output, marker)
    if FileSystems.exists(marker_path):
        FileSystems.delete([marker_path])
    old = _matched(join(output, pattern))
    if old:
        FileSystems.delete(old)
    staged = sorted(_matched(join(staging, pattern)))
    targets = [join(output, p.rsplit("/", 1)[-1]) for p in staged]
    if staged:
        FileSystems.rename(staged, targets)
    write_json(marker_path, marker_data)
    remove_dir(staging)
    return targets


def write_json(path: str, data: Any) -> None:
    tmp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    with FileSystems.create(tmp) as f:
        f.write((json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    FileSystems.rename([tmp], [path])


def read_json(path: str) -> Any:
    with FileSystems.open(path) as f:
        return json.loads(f.read().decode("utf-8"))


def remove_dir(path: str) -> None:
    leftovers = _matched(join(path, "**")) or _matched(join(path, "*"))
    if leftovers:
        FileSystems.delete(leftovers)
    if FileSystems.exists(path):
        FileSystems.delete([path])
