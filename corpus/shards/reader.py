"""Reading shards for training: open any source, verify it, stream validated blocks.

`open_url` opens a local path, a `file://` or other fsspec URL (`s3://`, `gs://`,
`https://`, `memory://`, ... with the filesystem's package installed) or a `pipe:` command
(webdataset's convention: the command writes the shard to stdout). `ShardReader` streams
the blocks of one shard that a manifest describes and checks each block against the
manifest before handing it out (key, members, sequence count, dtype, id range), so a
truncated or altered shard never yields a partial block: it raises `ShardFormatError`
naming the shard and the byte offset where the damage was found.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tarfile
from collections import OrderedDict
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urlparse
from urllib.request import url2pathname

import numpy as np

from clozeworks.corpus.shards.blocks import Block, ShardFormatError, decode_block, iter_groups
from clozeworks.schemas.manifest import Manifest, ShardInfo, block_key

_SHARD_IN_URL = re.compile(r"shard-(\d{6})\.tar")
_CHUNK = 1 << 20


def is_local(url: str) -> bool:
    """A plain path or a file:// URL (as opposed to a remote URL or a pipe: command)."""
    scheme = urlparse(url).scheme
    return not url.startswith("pipe:") and (scheme in ("", "file") or len(scheme) == 1)


def local_path(url: str) -> str:
    return url2pathname(urlparse(url).path) if url.startswith("file:") else url


def open_url(url: str) -> IO[bytes]:
    """Open a path, fsspec URL or `pipe:` command for binary reading. OSError if it cannot."""
    if url.startswith("pipe:"):
        import webdataset

        try:
            # webdataset's Pipe raises when the command exits non-zero, on read and close.
            return webdataset.gopen(url, "rb")
        except ValueError as err:  # WDS_SECURE=1 forbids pipes
            raise OSError(str(err)) from None
    if is_local(url):
        return open(local_path(url), "rb")
    import fsspec

    try:
        return fsspec.open(url, "rb").open()
    except (ImportError, ValueError) as err:  # no filesystem package for this scheme
        raise OSError(f"cannot open {url}: {err}") from None


def read_url(url: str) -> bytes:
    with open_url(url) as f:
        return f.read()


def shard_index(name: str) -> int:
    """The NNNNNN of `shard-NNNNNN.tar` in a name, path, URL or pipe command (last match)."""
    found = _SHARD_IN_URL.findall(name)
    if not found:
        raise ValueError(f"{name}: no shard-NNNNNN.tar in it")
    return int(found[-1])


@dataclass(frozen=True)
class ShardSpec:
    """What the manifest promises about one shard: the reader checks every block against it."""

    name: str
    sequences: int
    blocks: int
    bytes: int
    sha256: str
    block_size: int
    token_dtype: str
    vocab_size: int
    members: frozenset[str]
    max_seq_len: int = 1 << 15

    @classmethod
    def from_manifest(cls, manifest: Manifest, info: ShardInfo) -> ShardSpec:
        members = {"tokens", "offsets"}
        if manifest.is_pair_mode:
            members |= {"segments", "labels"}
        if manifest.premask is not None:
            members |= {"mlm_positions", "mlm_offsets", "mlm_labels"}
        if manifest.settings.get("provenance"):
            members |= {"docs", "doc_offsets"}
        return cls(
            name=info.name,
            sequences=info.sequences,
            blocks=info.blocks,
            bytes=info.bytes,
            sha256=info.sha256,
            block_size=manifest.block_size,
            token_dtype=manifest.token_dtype,
            vocab_size=manifest.vocab_size,
            members=frozenset(members),
            max_seq_len=manifest.max_seq_len,
        )

    @property
    def max_member_bytes(self) -> int:
        """The largest member a block of this set can hold (every array is at most
        block_size x max_seq_len entries of 8 bytes), so a tar header claiming more is
        refused before anything is allocated for it."""
        return (self.block_size + 1) * self.max_seq_len * 8 + 4096

    @property
    def index(self) -> int:
        return shard_index(self.name)

    def block_sequences(self, k: int) -> int:
        """Sequences in block k: full blocks, except that the last may be short."""
        return min(self.block_size, self.sequences - k * self.block_size)


def check_local_size(url: str, spec: ShardSpec) -> None:
    """A local shard whose size differs from the manifest's is truncated or replaced."""
    if not is_local(url):
        return
    try:
        size = os.stat(local_path(url)).st_size
    except OSError as err:
        raise ShardFormatError(spec.name, "open", err.strerror or str(err)) from None
    if size != spec.bytes:
        what = "truncated" if size < spec.bytes else "longer than written"
        raise ShardFormatError(
            spec.name,
            f"byte {min(size, spec.bytes)}",
            f"file has {size} bytes, the manifest says {spec.bytes} ({what})",
        )


def verify_sha256(url: str, spec: ShardSpec) -> None:
    """Hash the whole shard and compare with the manifest; ShardFormatError if they differ."""
    sha = hashlib.sha256()
    size = 0
    try:
        with open_url(url) as f:
            while data := f.read(_CHUNK):
                sha.update(data)
                size += len(data)
    except OSError as err:
        raise ShardFormatError(spec.name, f"byte {size}", f"read failed ({err})") from None
    got = sha.hexdigest()
    if got != spec.sha256:
        raise ShardFormatError(
            spec.name,
            f"bytes 0-{size}",
            f"sha256 {got[:16]}… does not match the manifest's {spec.sha256[:16]}… "
            "(the shard was altered or replaced)",
        )


class BlockError(ShardFormatError):
    """One block's content is damaged but the tar around it is sound: later blocks of the
    same reader can still be read. Any other ShardFormatError from a reader means nothing
    from `reader.next_block` on can be read."""

    def __init__(self, shard: str, where: str, problem: str, block: int) -> None:
        super().__init__(shard, where, problem)
        self.block = block

    def __reduce__(self) -> tuple[type, tuple[str, str, str, int]]:  # type: ignore[override]
        return (type(self), (self.shard, self.where, self.problem, self.block))


class ShardReader:
    """Reads the blocks of one shard in increasing order, each checked against `spec`.

    `read(k)` returns block k, skipping (without decoding) the blocks before it; a seekable
    source seeks over them. A damaged block raises `BlockError`; damage that stops the
    reading (truncation, a broken tar, a failing command) raises `ShardFormatError`; both
    name the shard and the byte offset. Close it when done (or use it as a context manager).
    """

    def __init__(self, url: str, spec: ShardSpec, verify: bool = False) -> None:
        self.spec = spec
        self.url = url
        check_local_size(url, spec)
        if verify:
            verify_sha256(url, spec)
        try:
            self._file = open_url(url)
        except OSError as err:
            raise ShardFormatError(spec.name, "open", str(err)) from None
        self._seekable = is_local(url) or bool(getattr(self._file, "seekable", lambda: False)())
        # Where blocks start, learned by earlier readers of the same shard in this process,
        # so a reader that starts deep in a shard seeks instead of scanning the headers.
        self._index = _block_starts(url, spec.sha256)
        self._wanted = ""
        self._open_tar(0, 0)

    def _open_tar(self, block: int, offset: int) -> None:
        try:
            if self._seekable:
                self._file.seek(offset)
                self._tar = tarfile.open(fileobj=self._file, mode="r:")  # noqa: SIM115
            else:
                self._tar = tarfile.open(fileobj=self._file, mode="r|")  # noqa: SIM115
        except (tarfile.TarError, OSError) as err:
            with contextlib.suppress(OSError):
                self._file.close()
            problem = "read failed" if isinstance(err, OSError) else "not a valid tar"
            raise ShardFormatError(self.spec.name, f"byte {offset}", f"{problem} ({err})") from None
        self._groups = iter_groups(
            self._tar, self.spec.name, self._want, self.spec.max_member_bytes
        )
        self.next_block = block

    def _want(self, key: str) -> bool:
        return key == self._wanted

    def read(self, k: int) -> Block:
        spec = self.spec
        if not self.next_block <= k < spec.blocks:
            raise ValueError(f"{spec.name}: block {k} is behind the reader or past the end")
        self._wanted = block_key(spec.index, k)
        if self._seekable and k > self.next_block and k in self._index:
            self._open_tar(k, self._index[k])
        while True:
            expected = block_key(spec.index, self.next_block)
            group = next(self._groups, None)
            if group is None:
                raise ShardFormatError(
                    spec.name,
                    f"byte {self._position()}",
                    f"ends after {self.next_block} of {spec.blocks} blocks "
                    "(truncated, or a damaged header)",
                )
            key, members, start = group
            if key != expected:
                raise ShardFormatError(
                    spec.name, f"byte {start}", f"expected block {expected}, found {key}"
                )
            self._index[self.next_block] = start
            self.next_block += 1
            if key == self._wanted:
                try:
                    return self._checked(key, members, start, k)
                except ShardFormatError as err:
                    raise BlockError(err.shard, err.where, err.problem, k) from None

    def _checked(self, key: str, members: dict[str, bytes], start: int, k: int) -> Block:
        spec = self.spec
        where = f"block {key} (byte {start})"
        names = {ext.removesuffix(".npy") for ext in members}
        if names != spec.members:
            missing = ", ".join(sorted(spec.members - names)) or "none"
            extra = ", ".join(sorted(names - spec.members)) or "none"
            raise ShardFormatError(
                spec.name,
                where,
                f"members do not match the manifest (missing {missing}; "
                f"unexpected {extra}): truncated or altered",
            )
        block = decode_block(members, spec.name, key)
        _check_block_against(block, spec, where, spec.block_sequences(k))
        return block

    def _position(self) -> int:
        return int(self._tar.offset)  # where tarfile stopped reading

    def close(self) -> None:
        try:
            self._tar.close()
        finally:
            # A pipe stopped early by SIGPIPE after a partial read has lost nothing we need.
            with contextlib.suppress(OSError):
                self._file.close()

    def __enter__(self) -> ShardReader:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


_BLOCK_STARTS: OrderedDict[tuple[str, str], dict[int, int]] = OrderedDict()
_INDEXED_SHARDS = 256  # the most recently opened; a few hundred bytes per block each


def _block_starts(url: str, sha256: str) -> dict[int, int]:
    key = (url, sha256)
    starts = _BLOCK_STARTS.pop(key, None)
    _BLOCK_STARTS[key] = starts = {} if starts is None else starts
    while len(_BLOCK_STARTS) > _INDEXED_SHARDS:
        _BLOCK_STARTS.popitem(last=False)
    return starts


def _check_block_against(block: Block, spec: ShardSpec, where: str, sequences: int) -> None:
    def bad(problem: str) -> ShardFormatError:
        return ShardFormatError(spec.name, where, problem)

    if len(block) != sequences:
        raise bad(f"holds {len(block)} sequences, the manifest implies {sequences}")
    if block.tokens.dtype != np.dtype(spec.token_dtype):
        raise bad(f"tokens are {block.tokens.dtype}, the manifest says {spec.token_dtype}")
    if block.tokens.size and int(block.tokens.max()) >= spec.vocab_size:
        raise bad(f"token id {int(block.tokens.max())} is outside the vocabulary")
    lengths = np.diff(block.offsets)
    if lengths.size and (int(lengths.min()) < 1 or int(lengths.max()) > spec.max_seq_len):
        raise bad(
            f"a sequence of {int(lengths.min()) if lengths.min() < 1 else int(lengths.max())} "
            f"tokens; the manifest's sequences hold 1..{spec.max_seq_len}"
        )
    if block.labels is not None and np.any((block.labels < 0) | (block.labels > 2)):
        raise bad("a sentence label outside 0..2")
    labels = block.mlm_labels
    if labels is not None and labels.size and int(labels.max()) >= spec.vocab_size:
        raise bad(f"pre-masked label {int(labels.max())} is outside the vocabulary")
    if block.segments is not None and np.any((block.segments < 1) | (block.segments > lengths)):
        raise bad("a segment length is outside its sequence")
    if block.mlm_positions is not None and block.mlm_offsets is not None:
        owner = np.repeat(np.arange(len(block)), np.diff(block.mlm_offsets))
        pos = block.mlm_positions
        if np.any((pos < 0) | (pos >= lengths[owner])):
            raise bad("a pre-masked position is outside its sequence")
