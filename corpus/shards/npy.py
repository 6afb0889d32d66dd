"""Reading `.npy` bytes without `np.load`'s per-array cost.

`np.load` parses every header with `ast.literal_eval`, about 100 µs an array: on a
gigabyte of shards (15,000 arrays) that is more than the tar reading itself. The headers
clozeworks writes are always the same few shapes of one line, so a strict regular
expression reads them and `np.frombuffer` wraps the data without copying. Anything else
(another header layout, big-endian, a size that does not match) goes to `np.load`, so the
errors and the accepted inputs are numpy's own. Nothing is ever unpickled: the fast path
accepts only plain numeric dtypes and the fallback passes `allow_pickle=False`.
"""

from __future__ import annotations

import io
import math
import re

import numpy as np

_MAGIC = b"\x93NUMPY\x01\x00"  # format version 1.0: a 2-byte header length follows
_HEADER = re.compile(
    rb"\{'descr': '([<|][uif][1248])', 'fortran_order': False, 'shape': \((\d+),\), \} *\n"
)


def load_npy_readonly(data: bytes) -> np.ndarray:
    """The 1-d array stored in `data`, as a read-only view of it when the header is one
    `np.save` writes for a 1-d little-endian numeric array; otherwise `np.load`'s result.
    Raises what `np.load` raises (ValueError, OSError, EOFError) for bytes it refuses."""
    if data[:8] == _MAGIC and len(data) >= 10:
        start = 10 + int.from_bytes(data[8:10], "little")
        match = _HEADER.fullmatch(data, 10, start)
        if match is not None:
            dtype = np.dtype(match.group(1).decode("ascii"))
            count = int(match.group(2))
            if len(data) - start == count * dtype.itemsize:
                return np.frombuffer(data, dtype=dtype, count=count, offset=start)
    return load_npy(data)


def load_npy(data: bytes) -> np.ndarray:
    """`np.load` of `data`, once its header's shape is known to match the bytes there are.

    `np.load` allocates the array its header describes before reading into it, so a
    damaged header claiming 10^12 elements was a MemoryError rather than a bad array."""
    stream = io.BytesIO(data)
    version = np.lib.format.read_magic(stream)
    read_header = {
        (1, 0): np.lib.format.read_array_header_1_0,
        (2, 0): np.lib.format.read_array_header_2_0,
    }.get(version)
    if read_header is None:
        raise ValueError(f".npy format version {version} is not one clozeworks writes")
    try:
        shape, _, dtype = read_header(stream)
    except ValueError:
        raise
    except Exception as err:  # numpy's header parser lets SyntaxError, TokenError, ... out
        raise ValueError(f"unreadable .npy header ({type(err).__name__}: {err})") from None
    if dtype.hasobject:
        raise ValueError("object arrays are never loaded (they would need unpickling)")
    expected = math.prod(shape) * dtype.itemsize
    if expected != len(data) - stream.tell():
        raise ValueError(
            f"header says shape {shape} of {dtype} ({expected} bytes) "
            f"but {len(data) - stream.tell()} bytes follow it"
        )
    return np.load(io.BytesIO(data), allow_pickle=False)
