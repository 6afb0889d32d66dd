"""Remote shards on local disk: whole shards downloaded once, least recently used evicted.

As mosaicml streaming does, a remote shard (`https://`, `s3://`, `gs://`, ... or a `pipe:`
command) is downloaded whole into a cache directory before it is read, so later epochs
and resumed runs read it from disk. Each source has its own folder in the cache root,
laid out as a shard directory (.manifest.json, .tokenizer/, shard-NNNNNN.tar), so `cloze
inspect` can read a mirrored set like a local one. A download is checked against the
manifest's size and sha256 while it is written (to a temporary name, renamed when whole),
so a file in the cache is always a complete, correct shard.

A dropped connection is retried from the byte it reached (a seekable source) or from the
start (a pipe), `RETRIES` times with a growing pause; then `ShardFormatError` names the
shard and the byte offset. The cache holds at most `limit` bytes: before a download, the
least recently used shards of the folder are removed until the new one fits (a reader
that has one open keeps reading it; POSIX unlink). A shard larger than the limit is still
downloaded and read.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from clozeworks.corpus.shards.blocks import ShardFormatError
from clozeworks.corpus.shards.reader import ShardSpec, is_local, open_url, read_url
from clozeworks.schemas.sidecars import MANIFEST_FILE

RETRIES = 4
_CHUNK = 1 << 20
_PAUSE = 0.5  # seconds before the first retry; doubled each time
DEFAULT_LIMIT = 20 * 10**9


def default_cache_root() -> Path:
    """`$CLOZEWORKS_CACHE`, else `$XDG_CACHE_HOME/clozeworks`, else ~/.cache/clozeworks."""
    root = os.environ.get("CLOZEWORKS_CACHE")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "clozeworks"


def is_remote(url: str) -> bool:
    return not is_local(url)


@dataclass(frozen=True)
class ShardCache:
    """The cache folder of one source (picklable: loader workers get a copy)."""

    directory: Path
    limit: int = DEFAULT_LIMIT

    @classmethod
    def for_source(
        cls, location: str, root: Path | None = None, limit: int = DEFAULT_LIMIT
    ) -> ShardCache:
        digest = hashlib.sha256(location.encode("utf-8")).hexdigest()[:16]
        return cls((root or default_cache_root()) / "shards" / digest, limit)

    def adopt_manifest(self, text: str) -> None:
        """Record the source's manifest; a different one (the set was rebuilt) empties the
        folder first, so no shard of the old set is ever read for the new one."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / MANIFEST_FILE
        with contextlib.suppress(OSError):
            if path.read_text(encoding="utf-8") == text:
                return
        for old in self.directory.glob("shard-*.tar"):
            old.unlink(missing_ok=True)
        _write_atomic(path, text.encode("utf-8"))

    def keep_file(self, relative: str, data: bytes) -> None:
        """A small file beside the shards (the tokenizer), for an inspectable mirror."""
        path = self.directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(path, data)

    def fetch(self, url: str, spec: ShardSpec) -> str:
        """A local path holding the whole of shard `spec` from `url` (downloaded if need be)."""
        path = self.directory / spec.name
        with contextlib.suppress(OSError):
            if path.stat().st_size == spec.bytes:
                os.utime(path)  # most recently used
                return str(path)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._make_room(spec.bytes, keep=spec.name)
        tmp = self.directory / f".{spec.name}.{os.getpid()}.part"
        try:
            download(url, tmp, spec)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return str(path)

    def _make_room(self, incoming: int, keep: str) -> None:
        held = []
        for p in self.directory.glob("shard-*.tar"):
            with contextlib.suppress(OSError):
                st = p.stat()
                held.append((st.st_mtime, st.st_size, p))
        total = sum(size for _, size, _ in held) + incoming
        for _, size, p in sorted(held):
            if total <= self.limit:
                break
            if p.name != keep:
                p.unlink(missing_ok=True)
                total -= size


def download(url: str, target: Path, spec: ShardSpec) -> None:
    """Write the shard at `url` to `target`, checking size and sha256, retrying drops."""
    sha = hashlib.sha256()
    done = 0
    tries = 0
    with open(target, "wb") as out:
        while True:
            try:
                done = _copy(url, out, sha, done)
                break
            except ShardFormatError:
                raise
            except Exception as err:
                tries += 1
                if tries > RETRIES:
                    raise ShardFormatError(
                        spec.name,
                        f"byte {done}",
                        f"download from {url} failed after {RETRIES} retries "
                        f"({type(err).__name__}: {err})",
                    ) from None
                time.sleep(_PAUSE * 2 ** (tries - 1))
                if url.startswith("pipe:"):  # a pipe cannot seek: start again
                    out.seek(0)
                    out.truncate()
                    sha, done = hashlib.sha256(), 0
    if done != spec.bytes:
        raise ShardFormatError(
            spec.name, f"byte {done}", f"{url} has {done} bytes, the manifest says {spec.bytes}"
        )
    if sha.hexdigest() != spec.sha256:
        raise ShardFormatError(
            spec.name,
            f"bytes 0-{done}",
            f"sha256 of {url} does not match the manifest's (the shard was altered or replaced)",
        )


def _copy(url: str, out: IO[bytes], sha: Any, start: int) -> int:
    """Append the bytes of `url` from `start` on to `out`; the offset reached."""
    done = start
    with open_url(url) as src:
        if start:
            src.seek(start)
        while data := src.read(_CHUNK):
            out.write(data)
            sha.update(data)
            done += len(data)
    return done


def read_remote(url: str, retries: int = RETRIES) -> bytes:
    """A small remote file (manifest, tokenizer), retried like a shard; OSError at the end
    (FileNotFoundError at once when the place says there is no such file)."""
    for tries in range(retries + 1):
        try:
            with open_url(url) as f:
                return f.read()
        except FileNotFoundError:
            raise
        except Exception as err:
            if tries == retries:
                raise OSError(f"{url}: {type(err).__name__}: {err}") from None
            time.sleep(_PAUSE * 2**tries)
    raise AssertionError("unreachable")


def read_any(url: str, retries: int = RETRIES) -> bytes:
    """A small file from a local path, or from a URL or pipe retried like `read_remote`."""
    return read_url(url) if is_local(url) else read_remote(url, retries)


def read_first(urls: Sequence[str], retries: int = RETRIES) -> tuple[bytes, int]:
    """The first of `urls` that can be read (a sidecar under its current name, then under
    its earlier one) and its index. When none can, the first is retried as `read_any` does
    and its error raised, so a passing fault is not taken for an old layout."""
    for index, url in enumerate(urls):
        try:
            return read_any(url, retries=0), index
        except OSError:
            continue
    return read_any(urls[0], retries), 0


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    tmp.write_bytes(data)
    os.replace(tmp, path)
