"""A finished directory copied to an object store (`cloze export --output gs://...`).

An object store has no rename, so a half-copied model cannot be hidden under a temporary
name: the files go up in order with `config.json`, the one a loader opens first, last. A
prefix without it is unfinished, never a model that loads with missing weights."""

from __future__ import annotations

from pathlib import Path

from clozeworks.schemas.errors import BadInputError

LAST = "config.json"


def publish(directory: Path, url: str) -> list[str]:
    """Upload every file under `directory` to `url` (a prefix); the URLs written. Refuses a
    prefix that already holds objects, as the local export refuses nothing but replaces:
    deleting a user's objects on a bucket is not something to do implicitly."""
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(url.rstrip("/"))
    except (ImportError, ValueError) as err:
        raise BadInputError(f"{url}: cannot write there: {err}") from None
    if fs.exists(root) and fs.find(root):
        raise BadInputError(f"{url}: already holds objects; export to an empty prefix")
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    files.sort(key=lambda p: p.relative_to(directory).as_posix() == LAST)
    written = []
    for path in files:
        target = f"{root}/{path.relative_to(directory).as_posix()}"
        try:
            fs.put_file(str(path), target)
        except OSError as err:
            raise BadInputError(f"{url}: upload of {path.name} failed: {err}") from None
        written.append(fs.unstrip_protocol(target))
    return written
