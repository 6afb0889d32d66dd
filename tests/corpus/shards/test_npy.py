import io

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clozeworks.corpus.shards.npy import load_npy_readonly

DTYPES = ["uint8", "int8", "uint16", "int16", "uint32", "int64", "float32", "float64"]


def npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


@given(dtype=st.sampled_from(DTYPES), n=st.integers(min_value=0, max_value=3000))
def test_same_array_as_np_load(dtype, n) -> None:
    array = (np.arange(n) * 7919 % 251).astype(dtype)
    loaded = load_npy_readonly(npy(array))
    assert loaded.dtype == array.dtype and np.array_equal(loaded, array)


def test_other_layouts_fall_back_to_np_load() -> None:
    for array in (np.arange(6).reshape(2, 3), np.arange(4, dtype=">u2"), np.array(5)):
        loaded = load_npy_readonly(npy(array))
        assert loaded.shape == array.shape and np.array_equal(loaded, array)


def test_bad_bytes_raise_what_np_load_raises() -> None:
    good = npy(np.arange(100, dtype=np.uint16))
    with pytest.raises(ValueError):
        load_npy_readonly(good[:-3])  # truncated data
    with pytest.raises(ValueError):
        load_npy_readonly(b"not an npy file at all")
    pickled = io.BytesIO()
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="allow_pickle=False"):
        load_npy_readonly(pickled.getvalue())  # never unpickled
