"""A read-ahead stream that can hash what passes through it on a second core.

The tar reader asks for 10 KiB at a time; this reads the file in 1 MiB chunks and serves
those requests from memory. With `hashing`, every chunk goes to a background thread for
sha256 (hashlib releases the GIL on large updates), so verifying a shard costs one read
and the hash overlaps with decoding.
"""

from __future__ import annotations

import hashlib
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO

CHUNK = 1 << 20
# Chunks queued for hashing at most; bounds memory if hashing falls behind.
IN_FLIGHT = 8


class ReadAhead:
    """`read(n)` / `tell()` over `raw`; `hexdigest()` reads to the end and returns the
    sha256 of every byte of `raw` (only with `hashing`). Use as a context manager."""

    def __init__(
        self,
        raw: IO[bytes],
        hashing: bool = False,
        chunk: int = CHUNK,
    ) -> None:
        self.raw = raw
        self.chunk = chunk
        self.position = 0
        self._buf = b""
        self._at = 0
        self._sha = hashlib.sha256()
        self._pool = ThreadPoolExecutor(1, "sha256") if hashing else None
        self._pending: deque[Future[None]] = deque()

    def _fill(self) -> bool:
        data = self.raw.read(self.chunk)
        if not data:
            return False
        if self._pool is not None:
            self._pending.append(self._pool.submit(self._sha.update, data))
            while len(self._pending) > IN_FLIGHT:
                self._pending.popleft().result()
        self._buf, self._at = data, 0
        return True

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = 1 << 62
        end = self._at + size
        if end <= len(self._buf):  # the common case: one tar record from the chunk
            out = self._buf[self._at : end]
            self._at = end
            self.position += size
            return out
        parts = []
        while size > 0:
            if self._at >= len(self._buf) and not self._fill():
                break
            take = self._buf[self._at : self._at + size]
            self._at += len(take)
            size -= len(take)
            parts.append(take)
        out = b"".join(parts)
        self.position += len(out)
        return out

    def tell(self) -> int:
        return self.position

    def hexdigest(self) -> str:
        """sha256 of the whole stream: what was read and everything after it."""
        if self._pool is None:
            raise ValueError("this stream was opened without hashing")
        while self._fill():
            pass
        self._buf, self._at = b"", 0
        for future in self._pending:
            future.result()
        self._pending.clear()
        return self._sha.hexdigest()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def __enter__(self) -> ReadAhead:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
