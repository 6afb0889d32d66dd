"""Arrays to bytes and back: exact, and refusing what `pack` did not write."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clozeworks.corpus.shards import arrays

DTYPES = ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float32"]


@given(
    st.lists(
        st.tuples(st.sampled_from(DTYPES), st.lists(st.integers(0, 100), max_size=20)),
        max_size=6,
    )
)
def test_pack_round_trips(spec: list[tuple[str, list[int]]]) -> None:
    originals = [np.array(values, dtype=dtype) for dtype, values in spec]
    back = arrays.unpack(arrays.pack(originals))
    assert len(back) == len(originals)
    for a, b in zip(originals, back, strict=True):
        assert a.dtype == b.dtype
        assert np.array_equal(a, b)
        assert b.flags.writeable


@given(st.lists(st.text(), max_size=10))
def test_strings_round_trip(strings: list[str]) -> None:
    data, offsets = arrays.strings_to_arrays(
        [s.encode("utf-8", "surrogatepass").decode("utf-8", "replace") for s in strings]
    )
    packed = arrays.unpack(arrays.pack([data, offsets]))
    assert arrays.arrays_to_strings(*packed) == [
        s.encode("utf-8", "surrogatepass").decode("utf-8", "replace") for s in strings
    ]


def test_refuses_objects_and_damaged_bytes() -> None:
    with pytest.raises(ValueError, match="cannot pack"):
        arrays.pack([np.array(["a"], dtype=object)])
    good = arrays.pack([np.arange(10, dtype=np.int64)])
    for bad in (good[:-1], good + b"x", b"", good[:6]):
        with pytest.raises(ValueError):
            arrays.unpack(bad)
    forged = bytearray(good)
    forged[4:8] = b"|O8 "  # an object dtype would unpickle: refused before any read
    with pytest.raises(ValueError):
        arrays.unpack(bytes(forged))
