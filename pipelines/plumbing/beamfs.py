"""`clozeworks.corpus.outputs.OutputFS` on Beam's FileSystems: local disk, gs://, s3://, ...

Every pipeline writes through `BEAM_FS`, so a stage's output may be any filesystem Beam
knows, on any runner.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator, Sequence
from typing import IO, Any

import apache_beam as beam
from apache_beam.io.filesystem import BeamIOError, CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from clozeworks.corpus.outputs import LOCAL, OutputFS
from clozeworks.pipelines.plumbing import s3clients
from clozeworks.schemas.errors import BadInputError, StoreError


def _store_exceptions() -> tuple[type[Exception], ...]:
    """What Beam's object-store clients raise once their retries are spent, beside OSError
    (BeamIOError is one): S3's client errors and Google's API errors (GCS) carry the HTTP
    status."""
    found: list[type[Exception]] = []
    with contextlib.suppress(ImportError):
        from apache_beam.io.aws.clients.s3.messages import S3ClientError

        found.append(S3ClientError)
    with contextlib.suppress(ImportError):
        from google.api_core.exceptions import GoogleAPICallError

        found.append(GoogleAPICallError)
    return tuple(found)


@contextlib.contextmanager
def store_errors(path: str) -> Iterator[None]:
    """An object store's refusal that retries did not fix, as one line naming `path`:
    StoreError (exit 1), or for an object that is not there, BadInputError (exit 2). Beam's
    renames and deletes gather their per-object refusals in one BeamIOError: the first
    refusal found there is the one said."""
    try:
        yield
    except _store_exceptions() as err:
        raise _refusal(path, err) from None
    except BeamIOError as err:
        details = getattr(err, "exception_details", None) or {}
        inner = [e for e in details.values() if isinstance(e, _store_exceptions())]
        if not inner:
            raise
        raise _refusal(path, inner[0]) from None


def _refusal(path: str, err: Exception) -> Exception:
    status = getattr(err, "code", None)
    said = str(getattr(err, "message", err)).splitlines()[0]
    if "NoSuchBucket" in said:
        bucket = path.split("://", 1)[-1].split("/", 1)[0]
        return StoreError(f"{path}: the bucket {bucket} does not exist; create it or name another")
    if status == 404:
        return BadInputError(f"{path}: not found ({said}); it was there when listed")
    return StoreError(
        f"{path}: the object store refused after its retries (HTTP {status}: {said}); "
        "run again later, or check the credentials may read and write there"
    )


class _StoreReads:
    """An object open for reading whose store failures (after the client's retries) are
    one line naming it (`store_errors`), however far into the object they come."""

    def __init__(self, raw: Any, path: str) -> None:
        self._raw = raw
        self._path = path

    def read(self, size: int = -1) -> bytes:
        with store_errors(self._path):
            return self._raw.read(size)

    def read1(self, size: int = -1) -> bytes:
        with store_errors(self._path):
            return self._raw.read1(size)

    def readinto(self, buffer: Any) -> int:
        with store_errors(self._path):
            return self._raw.readinto(buffer)

    def readline(self, size: int = -1) -> bytes:
        with store_errors(self._path):
            return self._raw.readline(size)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.readline, b"")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def __enter__(self) -> _StoreReads:
        return self

    def __exit__(self, *exc: object) -> None:
        self._raw.close()


class BeamFS(OutputFS):
    def join(self, base: str, *names: str) -> str:
        return FileSystems.join(base, *names)

    def _create(self, path: str) -> IO[bytes]:
        with store_errors(path):
            return FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)

    def open(self, path: str) -> IO[bytes]:
        with store_errors(path):
            raw = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
        if FileSystems.get_scheme(path) in (None, "file"):
            return raw
        return _StoreReads(raw, path)  # type: ignore[return-value]

    def rename(self, sources: Sequence[str], targets: Sequence[str]) -> None:
        with store_errors(targets[0] if targets else ""):
            FileSystems.rename(list(sources), list(targets))

    def delete(self, paths: Sequence[str]) -> None:
        with store_errors(paths[0] if paths else ""):
            present = [p for p in paths if FileSystems.exists(p)]
            if present:
                FileSystems.delete(present)

    def exists(self, path: str) -> bool:
        with store_errors(path):
            return FileSystems.exists(path)

    def match(self, pattern: str) -> list[str]:
        try:
            return sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)
        except Exception:  # a directory that does not exist matches nothing
            return []

    def mkdirs(self, directory: str) -> None:
        if FileSystems.get_scheme(directory) in (None, "file"):
            LOCAL.mkdirs(directory.removeprefix("file://"))
        # Object stores have no directories to make.

    def is_directory(self, path: str) -> bool:
        if FileSystems.get_scheme(path) in (None, "file"):
            return os.path.isdir(path)
        return super().is_directory(path)  # object stores: is any object under the prefix

    def staging_dirs(self, output: str) -> list[str]:
        if FileSystems.get_scheme(output) in (None, "file"):
            return LOCAL.staging_dirs(output)
        return super().staging_dirs(output)  # object stores: prefixes of the objects

    def remove_tree(self, directory: str) -> None:
        leftovers = self.match(self.join(directory, "**")) or self.match(self.join(directory, "*"))
        if leftovers:
            FileSystems.delete(leftovers)
        if FileSystems.exists(directory):
            FileSystems.delete([directory])


BEAM_FS = BeamFS()

# The options the launcher's FileSystems were given (`share_options`), as a plain dict.
_LAUNCHER_OPTIONS: dict[str, Any] = {}


def share_options(options: PipelineOptions) -> None:
    """This process's FileSystems get `options` (the launcher lists and writes with the
    user's credentials and endpoints), and every `FileSystemsDoFn` made from now on carries
    them to its workers."""
    FileSystems.set_options(options)
    given = options.get_all_options(drop_default=True)
    _LAUNCHER_OPTIONS.clear()
    _LAUNCHER_OPTIONS.update({k: v for k, v in given.items() if k in _filesystem_dests()})


@functools.cache
def _filesystem_dests() -> frozenset[str]:
    """The options Beam's filesystems read (S3's, Google Cloud's, Azure's, HDFS's): only
    these travel, not the launcher's own paths and switches."""
    import argparse

    from apache_beam.options import pipeline_options as po

    parser = argparse.ArgumentParser()
    for view in (po.S3Options, po.GoogleCloudOptions, po.AzureOptions, po.HadoopFileSystemOptions):
        view._add_argparse_args(parser)
    return frozenset(action.dest for action in parser._actions)


class FileSystemsDoFn(beam.DoFn):
    """A DoFn that opens, lists or writes files through Beam's FileSystems on a worker.

    Workers that Beam's own worker main starts (Dataflow, the SDK container) give
    FileSystems the pipeline options; the SDK workers of an external worker pool
    (`worker_pool_main`) are started without them, and S3's client cannot be made with
    none ("Must provide one of client or options"). So the launcher's options travel with
    the DoFn and are given to a worker's FileSystems that has none. Subclasses call
    `super().__init__()` and `super().setup()`."""

    def __init__(self) -> None:
        super().__init__()
        self._filesystem_options = dict(_LAUNCHER_OPTIONS)

    def setup(self) -> None:
        if FileSystems._pipeline_options is None and self._filesystem_options:
            FileSystems.set_options(PipelineOptions.from_dictionary(self._filesystem_options))


# Beam's S3 filesystem, imported with FileSystems, shares its boto3 clients from here on
# (in every process that writes through this module: the launcher and the workers).
s3clients.install()
