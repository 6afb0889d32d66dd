"""`clozeworks.corpus.outputs.OutputFS` on Beam's FileSystems: local disk, gs://, s3://, ...

Every pipeline writes through `BEAM_FS`, so a stage's output may be any filesystem Beam
knows, on any runner.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import IO

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from clozeworks.corpus.outputs import LOCAL, OutputFS
from clozeworks.schemas.errors import BadInputError


class BeamFS(OutputFS):
    def join(self, base: str, *names: str) -> str:
        return FileSystems.join(base, *names)

    def create(self, path: str) -> IO[bytes]:
        return FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)

    def open(self, path: str) -> IO[bytes]:
        return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)

    def rename(self, sources: Sequence[str], targets: Sequence[str]) -> None:
        FileSystems.rename(list(sources), list(targets))

    def delete(self, paths: Sequence[str]) -> None:
        present = [p for p in paths if FileSystems.exists(p)]
        if present:
            FileSystems.delete(present)

    def exists(self, path: str) -> bool:
        return FileSystems.exists(path)

    def match(self, pattern: str) -> list[str]:
        try:
            return sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)
        except Exception:  # a directory that does not exist matches nothing
            return []

    def mkdirs(self, directory: str) -> None:
        if FileSystems.get_scheme(directory) in (None, "file"):
            if os.path.exists(directory) and not os.path.isdir(directory):
                raise BadInputError(f"{directory}: exists and is not a directory")
            os.makedirs(directory, exist_ok=True)
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
