"""Shard files: WebDataset tars whose samples are blocks of sequences (see docs/design.md).

Writing makes the members `webdataset.TarWriter` would (`TarStream`), with a fixed integer
mtime, so the same blocks give byte-identical tars and each member costs one 512-byte
header (a float mtime would add a PAX header of two more blocks to every member). Reading
streams the tar with `tarfile` and decodes `.npy` members with `allow_pickle=False`; nothing
in a shard is ever unpickled or extracted to disk.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import tarfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from clozeworks.corpus.outputs import LOCAL, OutputFS
from clozeworks.corpus.shards.npy import load_npy
from clozeworks.schemas.errors import ClozeError
from clozeworks.schemas.manifest import Manifest, ShardInfo, block_key, shard_name
from clozeworks.schemas.sidecars import MANIFEST_FILE, names_of

_SHARD_FILE = re.compile(r"^shard-\d{6}\.tar$")

# Every block member, in the order they are written.
MEMBERS = (
    "tokens",
    "offsets",
    "segments",
    "labels",
    "mlm_positions",
    "mlm_offsets",
    "mlm_labels",
    "docs",
    "doc_offsets",
)


class ShardFormatError(ClozeError):
    """A shard that cannot be read: the message names the shard, the block or byte offset."""

    def __init__(self, shard: str, where: str, problem: str) -> None:
        self.shard = shard
        self.where = where
        self.problem = problem
        super().__init__(f"{shard}: {where}: {problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:
        # Loader workers send it to the training process; the default would pass one arg.
        return (type(self), (self.shard, self.where, self.problem))


@dataclass
class Block:
    """A run of sequences stored as one tar sample. Arrays follow docs/design.md."""

    tokens: np.ndarray
    offsets: np.ndarray
    segments: np.ndarray | None = None
    labels: np.ndarray | None = None
    mlm_positions: np.ndarray | None = None
    mlm_offsets: np.ndarray | None = None
    mlm_labels: np.ndarray | None = None
    # `--provenance`: sequence i holds the documents keyed `docs[doc_offsets[i]:...[i + 1]]`.
    docs: np.ndarray | None = None
    doc_offsets: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def sequence(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]

    def sequences(self) -> list[np.ndarray]:
        return [self.sequence(i) for i in range(len(self))]

    def predictions(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Pre-masked blocks: (positions, original ids) of sequence i."""
        if self.mlm_positions is None or self.mlm_offsets is None or self.mlm_labels is None:
            raise ValueError("this block is not pre-masked")
        lo, hi = self.mlm_offsets[i], self.mlm_offsets[i + 1]
        return self.mlm_positions[lo:hi], self.mlm_labels[lo:hi]

    @property
    def num_tokens(self) -> int:
        return int(self.offsets[-1])


def make_block(
    sequences: Sequence[np.ndarray],
    token_dtype: str,
    segments: Sequence[int] | None = None,
    labels: Sequence[int] | None = None,
    predictions: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
    documents: tuple[np.ndarray, np.ndarray] | None = None,
) -> Block:
    """Pack sequences (and per-sequence extras) into a `Block` with the on-disk dtypes;
    `documents`: (keys, offsets) of the documents each sequence holds."""
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    offsets = np.zeros(len(sequences) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    tokens = (
        np.concatenate([np.asarray(s) for s in sequences]).astype(token_dtype, copy=False)
        if sequences
        else np.zeros(0, dtype=token_dtype)
    )
    block = Block(tokens=tokens, offsets=offsets)
    if segments is not None:
        block.segments = np.asarray(segments, dtype=np.int16)
    if labels is not None:
        block.labels = np.asarray(labels, dtype=np.int8)
    if predictions is not None:
        counts = np.fromiter((len(p[0]) for p in predictions), dtype=np.int64)
        block.mlm_offsets = np.zeros(len(predictions) + 1, dtype=np.int64)
        np.cumsum(counts, out=block.mlm_offsets[1:])
        block.mlm_positions = np.concatenate(
            [np.asarray(p[0], dtype=np.int16) for p in predictions] or [np.zeros(0, np.int16)]
        )
        block.mlm_labels = np.concatenate(
            [np.asarray(p[1]).astype(token_dtype) for p in predictions]
            or [np.zeros(0, token_dtype)]
        )
    if documents is not None:
        block.docs = np.asarray(documents[0], dtype=np.uint64)
        block.doc_offsets = np.asarray(documents[1], dtype=np.int64)
    return block


def _npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def encode_block(block: Block) -> dict[str, bytes]:
    """Member extension -> `.npy` bytes, for the arrays the block has."""
    out: dict[str, bytes] = {}
    for name in MEMBERS:
        array = getattr(block, name)
        if array is not None:
            out[f"{name}.npy"] = _npy_bytes(array)
    return out


def decode_block(
    members: dict[str, bytes],
    shard: str,
    key: str,
    load_array: Callable[[bytes], np.ndarray] = load_npy,
) -> Block:
    """Inverse of `encode_block`; ShardFormatError naming shard and key on any inconsistency.

    `load_array` turns a member's `.npy` bytes into an array (ValueError, OSError or
    EOFError on bad bytes); `cloze inspect` passes a faster, read-only one."""
    arrays: dict[str, np.ndarray] = {}
    for ext, data in members.items():
        name = ext.removesuffix(".npy")
        if name not in MEMBERS or not ext.endswith(".npy"):
            raise ShardFormatError(shard, f"block {key}", f"unexpected member {key}.{ext}")
        try:
            arrays[name] = load_array(data)
        except (ValueError, OSError, EOFError) as err:
            problem = f"{ext} is not a valid array ({err})"
            raise ShardFormatError(shard, f"block {key}", problem) from None
    if "tokens" not in arrays or "offsets" not in arrays:
        raise ShardFormatError(shard, f"block {key}", "tokens.npy or offsets.npy missing")
    block = Block(**arrays)
    _check_block(block, shard, key)
    return block


def _check_block(block: Block, shard: str, key: str) -> None:
    def bad(problem: str) -> ShardFormatError:
        return ShardFormatError(shard, f"block {key}", problem)

    off = block.offsets
    if off.ndim != 1 or len(off) < 1 or off[0] != 0 or np.any(np.diff(off) < 0):
        raise bad("offsets are not a non-decreasing list starting at 0")
    if off[-1] != len(block.tokens):
        raise bad(f"offsets end at {off[-1]} but there are {len(block.tokens)} tokens")
    n = len(off) - 1
    for name in ("segments", "labels"):
        arr = getattr(block, name)
        if arr is not None and len(arr) != n:
            raise bad(f"{name} has {len(arr)} entries for {n} sequences")
    if block.mlm_offsets is not None:
        mo = block.mlm_offsets
        if len(mo) != n + 1 or block.mlm_positions is None or block.mlm_labels is None:
            raise bad("pre-masked arrays are incomplete")
        if mo[-1] != len(block.mlm_positions) or len(block.mlm_positions) != len(block.mlm_labels):
            raise bad("mlm_offsets, mlm_positions and mlm_labels disagree")
    if (block.docs is None) != (block.doc_offsets is None):
        raise bad("docs and doc_offsets go together")
    if block.doc_offsets is not None and block.docs is not None:
        do = block.doc_offsets
        if do.ndim != 1 or len(do) != n + 1 or do[0] != 0 or np.any(np.diff(do) < 0):
            raise bad(f"doc_offsets are not {n + 1} non-decreasing entries from 0")
        if do[-1] != len(block.docs):
            raise bad(f"doc_offsets end at {do[-1]} but there are {len(block.docs)} docs")


class ShardWriter:
    """Writes one shard to `directory` under a temporary name; `close()` renames it.

    The sha256 and size are computed while writing, so a shard is read once, by the trainer.
    An exception inside `with ShardWriter(...)` removes the temporary file. `fs` decides
    where the bytes go (default: the local disk).
    """

    def __init__(
        self, directory: str | Path, index: int, token_dtype: str, fs: OutputFS = LOCAL
    ) -> None:
        self.directory = str(directory)
        self.fs = fs
        self.name = shard_name(index)
        self.index = index
        self.token_dtype = token_dtype
        self._tmp = fs.join(self.directory, f".{self.name}.{uuid.uuid4().hex}.tmp")
        self._file = _HashingFile(fs.create(self._tmp))
        self._tar = TarStream(self._file)
        self.blocks = 0
        self.sequences = 0
        self.tokens = 0

    def write(self, block: Block) -> None:
        self._tar.write(block_key(self.index, self.blocks), encode_block(block))
        self.blocks += 1
        self.sequences += len(block)
        self.tokens += block.num_tokens

    def close(self) -> ShardInfo:
        self._tar.close()
        self._file.close()
        self.fs.rename([self._tmp], [self.fs.join(self.directory, self.name)])
        return ShardInfo(
            name=self.name,
            sequences=self.sequences,
            tokens=self.tokens,
            blocks=self.blocks,
            bytes=self._file.size,
            sha256=self._file.sha.hexdigest(),
        )

    def abort(self) -> None:
        """Remove the temporary file, whatever closing it says (a full disk fails the
        close's flush as it failed the write)."""
        with contextlib.suppress(Exception):
            self._tar.close()
        with contextlib.suppress(Exception):
            self._file.close()
        self.fs.delete([self._tmp])

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is not None:
            self.abort()


class TarStream:
    """Samples as tar members, byte for byte as `webdataset.TarWriter(f, encoder=False,
    mtime=0, user="", group="")` writes them (tests/corpus/shards/test_blocks.py compares), with
    the standard library alone: importing webdataset imports torch, a second at the start
    of every `cloze shard`."""

    def __init__(self, fileobj: io.RawIOBase | IO[bytes]) -> None:
        self._tar = tarfile.open(fileobj=fileobj, mode="w|")  # noqa: SIM115 (closed by close())

    def write(self, key: str, members: dict[str, bytes]) -> None:
        """Members `KEY.NAME`, in name order (webdataset sorts them too)."""
        for name in sorted(members):
            data = members[name]
            info = tarfile.TarInfo(f"{key}.{name}")
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o444
            info.uname = info.gname = ""
            self._tar.addfile(info, io.BytesIO(data))

    def close(self) -> None:
        self._tar.close()


class _HashingFile(io.RawIOBase):
    """A write-only file that hashes and counts what passes through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.sha = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.sha.update(view)
        self.size += view.nbytes
        return self.raw.write(view)

    def close(self) -> None:
        if not self.closed:
            self.raw.close()
        super().close()


def write_blocks(
    directory: str | Path,
    index: int,
    token_dtype: str,
    blocks: Iterable[Block],
    fs: OutputFS = LOCAL,
) -> ShardInfo:
    """Write a whole shard atomically and return its manifest entry."""
    with ShardWriter(directory, index, token_dtype, fs) as writer:
        for block in blocks:
            writer.write(block)
        return writer.close()


def iter_blocks(path: str | Path) -> Iterator[tuple[str, Block]]:
    """Yield (key, Block) from a shard file in order. ShardFormatError on damage."""
    name = os.path.basename(str(path))
    try:
        fileobj = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as err:
        raise ShardFormatError(name, "open", err.strerror or str(err)) from None
    with fileobj:
        yield from iter_blocks_from(fileobj, name)


def iter_blocks_from(
    fileobj: IO[bytes], name: str, load_array: Callable[[bytes], np.ndarray] = load_npy
) -> Iterator[tuple[str, Block]]:
    """As `iter_blocks`, from an open binary stream (a local file, a pipe, a URL).
    `load_array`: as for `decode_block`."""
    try:
        tar = tarfile.open(fileobj=fileobj, mode="r|")  # noqa: SIM115 - closed below
    except tarfile.TarError as err:
        raise ShardFormatError(name, "byte 0", f"not a valid tar ({err})") from None
    with tar:
        for key, members, _ in iter_groups(tar, name):
            yield key, decode_block(members, name, key, load_array)


def iter_groups(
    tar: tarfile.TarFile,
    name: str,
    want: Callable[[str], bool] | None = None,
    max_member_bytes: int | None = None,
) -> Iterator[tuple[str, dict[str, bytes], int]]:
    """(key, {extension: bytes}, byte offset of its first header) per run of same-key members.

    Members of keys `want` rejects are listed with empty data and not read, so a seekable
    tar skips over them. ShardFormatError naming the byte offset for a member that is not a
    regular file, appears twice, is cut short or (given `max_member_bytes`) claims more
    bytes than a block can hold, and for anything `tarfile` cannot parse.
    """
    key: str | None = None
    members: dict[str, bytes] = {}
    start = offset = 0
    try:
        while (info := tar.next()) is not None:
            offset = info.offset
            if not info.isfile():
                raise ShardFormatError(name, f"byte {offset}", f"{info.name} is not a file")
            this, _, ext = info.name.partition(".")
            if this != key:
                if key is not None:
                    yield key, members, start
                key, members, start = this, {}, offset
            if ext in members:
                raise ShardFormatError(name, f"byte {offset}", f"{info.name} appears twice")
            if want is not None and not want(this):
                members[ext] = b""
                continue
            if max_member_bytes is not None and info.size > max_member_bytes:
                problem = f"{info.name} claims {info.size} bytes; a block holds at most "
                raise ShardFormatError(name, f"byte {offset}", problem + str(max_member_bytes))
            stream = tar.extractfile(info)
            assert stream is not None
            members[ext] = stream.read()
            if len(members[ext]) != info.size:
                raise ShardFormatError(name, f"byte {offset}", f"{info.name} is cut short")
    except tarfile.TarError as err:
        raise ShardFormatError(name, f"byte {offset}", f"not a valid tar ({err})") from None
    except OSError as err:  # a failing pipe command, a dropped connection
        raise ShardFormatError(name, f"byte {offset}", f"read failed ({err})") from None
    if key is not None:
        yield key, members, start


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while data := f.read(chunk):
            sha.update(data)
    return sha.hexdigest()


def write_manifest(directory: str | Path, manifest: Manifest, fs: OutputFS = LOCAL) -> str:
    """Write .manifest.json atomically; call it after every shard is in place."""
    path = fs.join(str(directory), MANIFEST_FILE)
    fs.write_atomic(path, manifest.to_json().encode("utf-8"))
    return path


def prepare_output_dir(directory: str | Path, fs: OutputFS = LOCAL) -> str:
    """Make `directory` ready for a fresh shard set.

    The old manifest goes first (under either name: a set written before had a plain
    `manifest.json`), so an interrupted rerun never leaves a manifest that describes shards
    being replaced; then old shards and temporary files go.
    """
    out = str(directory)
    fs.mkdirs(out)
    fs.delete([fs.join(out, name) for name in names_of(MANIFEST_FILE)])
    old = [
        fs.join(out, name)
        for name in fs.listdir(out)
        if _SHARD_FILE.match(name) or (name.startswith(".") and name.endswith(".tmp"))
    ]
    fs.delete(old)
    return out
