"""Where every stage writes: one output-filesystem abstraction, and outputs never half written.

`OutputFS` is the handful of file operations a stage needs, and on top of them the
writes every stage shares: a file written under a temporary name and renamed into place
(`write_atomic`, `write_json`), and a directory whose new files are staged and committed
together, its marker file last (`new_staging_dir`, `commit`). Two filesystems implement it:
`LOCAL` here (the local disk, for code used without Beam) and `BEAM_FS` in
`clozeworks.pipelines.plumbing.beamfs` (Beam's FileSystems: local, gs://, s3://, ...), which every
pipeline passes, so the same code writes on a laptop and on Dataflow.

On object stores a rename is a copy and a delete, so a file appears under its final name
only once it is complete, which is the guarantee every marker file relies on.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from clozeworks.schemas.errors import BadInputError, SettingError, WriteError
from clozeworks.schemas.sidecars import names_of
from clozeworks.schemas.validate import loads


@contextlib.contextmanager
def writing(path: str, *also: type[Exception]) -> Iterator[None]:
    """An OSError inside (a full disk, a quota), or one of `also` (what a library that
    writes in native code raises instead: safetensors, torch.save), as a WriteError naming
    `path`."""
    caught: tuple[type[Exception], ...] = (OSError, *also)
    try:
        yield
    except WriteError:
        raise
    except caught as err:
        raise WriteError(path, err) from err


class _NamedWrites:
    """A file open for writing whose failures name it (WriteError): pyarrow, tarfile and
    Beam's writers see a file, the user sees which one a full disk stopped."""

    def __init__(self, raw: IO[bytes], path: str) -> None:
        self._raw = raw
        self._path = path

    def write(self, data: Any) -> int:
        with writing(self._path):
            return self._raw.write(data)

    def flush(self) -> None:
        with writing(self._path):
            self._raw.flush()

    def close(self) -> None:
        with writing(self._path):
            self._raw.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def __enter__(self) -> _NamedWrites:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class OutputFS(ABC):
    """Paths are strings; `join` builds them, so a backend decides what a separator is."""

    @abstractmethod
    def join(self, base: str, *names: str) -> str: ...

    def create(self, path: str) -> IO[bytes]:
        """A new file open for binary writing (an existing one is replaced); a failure to
        write it is a WriteError naming it."""
        with writing(path):
            raw = self._create(path)
        return _NamedWrites(raw, path)  # type: ignore[return-value]

    @abstractmethod
    def _create(self, path: str) -> IO[bytes]:
        """A new file open for binary writing, as the backend opens it."""

    @abstractmethod
    def open(self, path: str) -> IO[bytes]:
        """An existing file open for binary reading."""

    @abstractmethod
    def rename(self, sources: Sequence[str], targets: Sequence[str]) -> None:
        """Move each source to its target, replacing what is there."""

    @abstractmethod
    def delete(self, paths: Sequence[str]) -> None:
        """Remove these files; one that does not exist is not an error."""

    @abstractmethod
    def exists(self, path: str) -> bool: ...

    @abstractmethod
    def match(self, pattern: str) -> list[str]:
        """Paths matching a glob pattern, sorted; none (not an error) if nothing matches."""

    @abstractmethod
    def mkdirs(self, directory: str) -> None:
        """Make `directory` and its parents (object stores have none to make).
        BadInputError if it exists and is not a directory."""

    @abstractmethod
    def remove_tree(self, directory: str) -> None:
        """Remove `directory` and everything under it, if it exists."""

    def is_directory(self, path: str) -> bool:
        """Whether `path` is a directory: on an object store, which has none, whether any
        object lies under the prefix `path/`."""
        return bool(self.match(self.join(path, "*")) or self.match(self.join(path, "**")))

    def listdir(self, directory: str) -> list[str]:
        """The names of the files directly in `directory`, sorted; none if it is missing."""
        prefix = self.join(directory, "")
        names = [p[len(prefix) :] if p.startswith(prefix) else p for p in self.match(prefix + "*")]
        return sorted(n for n in names if n and "/" not in n)

    def write_atomic(self, path: str, data: bytes) -> None:
        """Write `data` to a hidden temporary file beside `path`, then rename it into place."""
        tmp = self.write_beside(path, data)
        try:
            with writing(path):
                self.rename([tmp], [path])
        except BaseException:
            self.delete([tmp])
            raise

    def write_beside(self, path: str, data: bytes) -> str:
        """`data` in a new hidden temporary file beside `path` (removed again if the write
        fails); its name."""
        head, _, name = path.rpartition("/")
        tmp = (
            f"{head}/.{name}.{uuid.uuid4().hex}.tmp" if head else f".{name}.{uuid.uuid4().hex}.tmp"
        )
        try:
            with self.create(tmp) as f:
                f.write(data)
        except BaseException:
            self.delete([tmp])
            raise
        return tmp

    def write_json(self, path: str, data: Any) -> None:
        """`data` as indented, key-sorted JSON, written atomically."""
        self.write_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())

    def read_json(self, path: str) -> Any:
        with self.open(path) as f:
            return loads(f.read().decode("utf-8"))

    def new_staging_dir(self, output: str) -> str:
        """A fresh `output/.staging-<run>/` for a stage's files until `commit`. Staging
        directories an interrupted run left there (a kill -9 runs no cleanup) go first:
        a run owns its output directory."""
        for stale in self.staging_dirs(output):
            self.remove_tree(stale)
        staging = self.join(output, f".staging-{uuid.uuid4().hex[:12]}")
        self.mkdirs(staging)
        return staging

    def staging_dirs(self, output: str) -> list[str]:
        """The `.staging-*` directories in `output`."""
        prefix = self.join(output, "")
        found = self.match(self.join(output, ".staging-*", "**"))
        return sorted({prefix + p[len(prefix) :].split("/", 1)[0] for p in found})

    def commit(
        self, staging: str, output: str, pattern: str, marker: str, marker_data: Any
    ) -> list[str]:
        """Replace `output`'s files matching `pattern` with the staged ones, then write
        `marker` (JSON) last and remove the staging directory. Returns the new paths.

        The marker is written beside its place first: a store that refuses it refuses it
        before anything at the final names has changed. Then the old marker goes (under its
        earlier name too), so an interrupted commit leaves a directory that readers refuse
        instead of a mix of old and new files that looks complete; and if the marker cannot
        be moved into place at the end, the files moved there are removed again.
        """
        path = self.join(output, marker)
        # A run killed inside an earlier commit may have left its marker's temporary file
        # (the output's lock keeps every other run out).
        self.delete(self.match(self.join(output, f".{marker}.*.tmp")))
        text = (json.dumps(marker_data, indent=2, sort_keys=True) + "\n").encode()
        ready = self.write_beside(path, text)
        targets: list[str] = []
        try:
            self.delete([self.join(output, name) for name in names_of(marker)])
            self.delete(self.match(self.join(output, pattern)))
            staged = self.match(self.join(staging, pattern))
            targets = [self.join(output, p.rsplit("/", 1)[-1]) for p in staged]
            if staged:
                self.rename(staged, targets)
            with writing(path):
                self.rename([ready], [path])
        except BaseException:
            with contextlib.suppress(Exception):
                self.delete([ready, *targets])
            raise
        self.remove_tree(staging)
        return targets


class LocalFS(OutputFS):
    """The local disk; a rename is atomic (os.replace)."""

    def join(self, base: str, *names: str) -> str:
        return os.path.join(base, *names)

    def _create(self, path: str) -> IO[bytes]:
        return open(path, "wb")

    def open(self, path: str) -> IO[bytes]:
        return open(path, "rb")

    def rename(self, sources: Sequence[str], targets: Sequence[str]) -> None:
        for src, dst in zip(sources, targets, strict=True):
            os.replace(src, dst)

    def delete(self, paths: Sequence[str]) -> None:
        for path in paths:
            Path(path).unlink(missing_ok=True)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_directory(self, path: str) -> bool:
        return os.path.isdir(path)

    def match(self, pattern: str) -> list[str]:
        return sorted(p for p in glob.glob(pattern, include_hidden=True) if os.path.isfile(p))

    def mkdirs(self, directory: str) -> None:
        # The path itself or the nearest existing parent may be a file.
        for path in (directory, *map(str, Path(directory).parents)):
            if os.path.exists(path):
                if not os.path.isdir(path):
                    raise BadInputError(f"{path}: exists and is not a directory")
                break
        with writing(directory):
            os.makedirs(directory, exist_ok=True)

    def remove_tree(self, directory: str) -> None:
        shutil.rmtree(directory, ignore_errors=True)

    def staging_dirs(self, output: str) -> list[str]:
        return sorted(glob.glob(os.path.join(glob.escape(output), ".staging-*")))


LOCAL = LocalFS()


def overlap(output: str, source: str) -> str | None:
    """How `output` would overlap `source` (a path, URL or glob of inputs): "is", "is
    inside" or "contains", or None when they are apart. A glob counts as the directory
    before its first wildcard. Local paths are compared resolved (symlinks, `..`)."""
    source = _before_wildcard(source)
    a, b = _comparable(output), _comparable(source)
    if a == b:
        return "is"
    if a.startswith(b.rstrip("/") + "/"):
        return "is inside"
    if b.startswith(a.rstrip("/") + "/"):
        return "contains"
    return None


def _before_wildcard(pattern: str) -> str:
    cut = min((i for i, ch in enumerate(pattern) if ch in "*?["), default=len(pattern))
    if cut == len(pattern):
        return pattern
    return pattern[: pattern.rfind("/", 0, cut) + 1] or "."


def _comparable(path: str) -> str:
    if "://" in path and not path.startswith("file://"):
        return path.rstrip("/") or path
    return os.path.realpath(path.removeprefix("file://"))


def check_apart(outputs: dict[str, str | None], inputs: dict[str, Sequence[str]]) -> None:
    """SettingError unless every output (setting -> path) is apart from every input
    (setting -> paths): an output inside an input is read back by the next run, one that
    contains an input or equals it replaces it. Checked before anything is touched."""
    for out_name, output in outputs.items():
        if not output:
            continue
        for in_name, sources in inputs.items():
            for source in sources:
                how = overlap(output, source)
                if how is not None:
                    raise SettingError(
                        out_name,
                        f"({output}) {how} {{{in_name}}} ({source}): a run would read "
                        "or replace what it writes; choose a place apart",
                    )
