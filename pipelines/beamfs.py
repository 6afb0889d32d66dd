"""`corpus.shards.blocks.OutputFS` on Beam's FileSystems: shards go to local disk, gs://, s3://...

On object stores a rename is a copy and a delete, so a shard appears under its final name
only once it is complete, which is the guarantee the manifest relies on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from clozeworks.schemas.errors import BadInputError


class BeamFS:
    def join(self, base: str, name: str) -> str:
        return FileSystems.join(base, name)

    def create(self, path: str) -> IO[bytes]:
        return FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)

    def rename(self, src: str, dst: str) -> None:
        FileSystems.rename([src], [dst])

    def delete(self, paths: Sequence[str]) -> None:
        present = [p for p in paths if FileSystems.exists(p)]
        if present:
            FileSystems.delete(present)

    def exists(self, path: str) -> bool:
        return FileSystems.exists(path)

    def listdir(self, directory: str) -> list[str]:
        try:
            matched = FileSystems.match([FileSystems.join(directory, "*")])[0].metadata_list
        except Exception:  # a directory that does not exist lists nothing
            return []
        prefix = FileSystems.join(directory, "")
        names = [m.path[len(prefix) :] if m.path.startswith(prefix) else m.path for m in matched]
        return sorted(n for n in names if n and "/" not in n)

    def mkdirs(self, directory: str) -> None:
        scheme = FileSystems.get_scheme(directory)
        if scheme in (None, "file"):
            import os

            if os.path.exists(directory) and not os.path.isdir(directory):
                raise BadInputError(f"{directory}: exists and is not a directory")
            os.makedirs(directory, exist_ok=True)
        # Object stores have no directories to make.


BEAM_FS = BeamFS()
