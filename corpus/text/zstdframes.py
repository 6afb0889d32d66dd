"""Catch a truncated .zst: zstandard's stream reader ends quietly where the bytes end, even
in the middle of a frame, so a file cut short would read as a shorter, complete one.

The check follows the frame and block headers of RFC 8878 over the compressed bytes as the
decompressor reads them (header fields only, no decompression), and raises EOFError, as
gzip, bz2 and lzma do, when the input ends anywhere but between two frames.
"""

from __future__ import annotations

import io
from typing import IO

_ZSTD_MAGIC = 0xFD2FB528
_SKIPPABLE_MASK, _SKIPPABLE = 0xFFFFFFF0, 0x184D2A50
_DID_BYTES = (0, 1, 2, 4)
_FCS_BYTES = (0, 2, 4, 8)


class _Frames:
    """A resumable walk over frame and block headers, fed chunk by chunk."""

    def __init__(self) -> None:
        self.need = 4  # bytes wanted by the current state
        self.state = "magic"
        self.held = b""  # a header split across chunks
        self.skip = 0  # payload bytes to pass over
        self.checksum = False

    def at_boundary(self) -> bool:
        return self.state == "magic" and not self.held and not self.skip

    def feed(self, data: bytes) -> None:
        pos = 0
        while pos < len(data):
            if self.skip:
                step = min(self.skip, len(data) - pos)
                self.skip -= step
                pos += step
                continue
            take = min(self.need - len(self.held), len(data) - pos)
            self.held += data[pos : pos + take]
            pos += take
            if len(self.held) == self.need:
                header, self.held = self.held, b""
                self._advance(header)

    def _advance(self, header: bytes) -> None:
        if self.state == "magic":
            magic = int.from_bytes(header, "little")
            if magic == _ZSTD_MAGIC:
                self.state, self.need = "descriptor", 1
            elif magic & _SKIPPABLE_MASK == _SKIPPABLE:
                self.state, self.need = "skippable", 4
            else:
                raise EOFError(f"not a zstd frame (magic {magic:#010x})")
        elif self.state == "skippable":
            self.state, self.need, self.skip = "magic", 4, int.from_bytes(header, "little")
        elif self.state == "descriptor":
            fhd = header[0]
            single = bool(fhd & 0x20)
            self.checksum = bool(fhd & 0x04)
            fcs = _FCS_BYTES[fhd >> 6] or (1 if single else 0)
            self.skip = (0 if single else 1) + _DID_BYTES[fhd & 0x03] + fcs
            self.state, self.need = "block", 3
        elif self.state == "block":
            value = int.from_bytes(header, "little")
            last, kind, size = value & 1, (value >> 1) & 3, value >> 3
            if kind == 3:
                raise EOFError("corrupt zstd block header (reserved block type)")
            self.skip = 1 if kind == 1 else size  # an RLE block stores its byte once
            if last and self.checksum:
                self.state, self.need = "checksum", 4
            elif last:
                self.state, self.need = "magic", 4
        elif self.state == "checksum":
            self.state, self.need = "magic", 4


class FrameCheckingReader(io.RawIOBase):
    """The compressed stream, passed through unchanged; raises EOFError at a truncated end."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.frames = _Frames()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        if data:
            self.frames.feed(data)
        elif not self.frames.at_boundary():
            raise EOFError("compressed file ended before the end of a zstd frame (truncated?)")
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.raw.close()
        super().close()
