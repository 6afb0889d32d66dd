"""Numeric arrays and string lists as bytes and back, without pickle.

What the shard builder's batches become when they cross a shuffle through files: a count,
then per array its dtype, length and raw little-endian bytes. Only 1-d arrays of plain
numeric dtypes are accepted, and decoding builds arrays with `np.frombuffer`, so nothing
in the bytes is ever executed. Strings travel as their UTF-8 bytes and offsets.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence

import numpy as np

_COUNT = struct.Struct("<I")
_HEADER = struct.Struct("<4sQ")  # dtype ('<u2 ', padded), number of items
_KINDS = frozenset("uifb")


def pack(arrays: Sequence[np.ndarray]) -> bytes:
    """Bytes holding `arrays` (1-d, numeric). ValueError for any other array."""
    parts = [_COUNT.pack(len(arrays))]
    for array in arrays:
        if array.ndim != 1 or array.dtype.kind not in _KINDS:
            raise ValueError(f"cannot pack a {array.ndim}-d {array.dtype} array")
        a = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
        parts.append(_HEADER.pack(a.dtype.str.encode("ascii"), len(a)))
        parts.append(a.tobytes())
    return b"".join(parts)


def unpack(data: bytes | memoryview) -> list[np.ndarray]:
    """The arrays `pack` stored in `data`, as writable copies. ValueError if `data` is not
    exactly what `pack` writes."""
    view = memoryview(data)
    try:
        (count,) = _COUNT.unpack_from(view, 0)
        pos = _COUNT.size
        out = []
        for _ in range(count):
            code, n = _HEADER.unpack_from(view, pos)
            pos += _HEADER.size
            dtype = np.dtype(code.rstrip(b" \x00").decode("ascii"))
            if dtype.kind not in _KINDS:
                raise ValueError(f"dtype {dtype} is not numeric")
            size = n * dtype.itemsize
            if pos + size > len(view):
                raise ValueError("truncated")
            out.append(np.frombuffer(view, dtype=dtype, count=n, offset=pos).copy())
            pos += size
    except (struct.error, TypeError, UnicodeDecodeError) as err:
        raise ValueError(f"not packed arrays: {err}") from None
    if pos != len(view):
        raise ValueError(f"{len(view) - pos} bytes after the last array")
    return out


def strings_to_arrays(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 bytes as uint8, int64 offsets of n + 1) for a list of strings."""
    encoded = [s.encode("utf-8") for s in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def arrays_to_strings(data: np.ndarray, offsets: np.ndarray) -> list[str]:
    raw = data.tobytes()
    bounds = offsets.tolist()
    return [raw[a:b].decode("utf-8") for a, b in itertools.pairwise(bounds)]
