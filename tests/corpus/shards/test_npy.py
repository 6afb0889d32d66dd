import io

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clozeworks.corpus.shards.blocks import ShardFormatError, decode_block
from clozeworks.corpus.shards.npy import load_npy, load_npy_readonly

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
    for load in (load_npy, load_npy_readonly):
        with pytest.raises(ValueError, match="never loaded"):
            load(pickled.getvalue())  # never unpickled


def forged(shape: tuple[int, ...], data: bytes) -> bytes:
    """An .npy file whose header claims `shape` of uint16, followed by `data`."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<u2", "fortran_order": False, "shape": shape}
    )
    return buf.getvalue() + data


@pytest.mark.parametrize("load", [load_npy, load_npy_readonly])
def test_a_header_claiming_a_huge_shape_is_refused_before_allocating(load) -> None:
    data = np.arange(100, dtype=np.uint16).tobytes()
    assert np.array_equal(load(forged((100,), data)), np.arange(100))  # the forger is right
    for shape in ((10**12,), (10**5, 10**5, 10**5), (101,)):
        with pytest.raises(ValueError, match="header says shape"):
            load(forged(shape, data))


def test_decode_block_names_the_shard_for_a_forged_header() -> None:
    members = {
        "tokens.npy": forged((10**12,), np.arange(4, dtype=np.uint16).tobytes()),
        "offsets.npy": npy(np.array([0, 4], dtype=np.int64)),
    }
    with pytest.raises(ShardFormatError, match=r"s\.tar.*block 000.*tokens\.npy"):
        decode_block(members, "s.tar", "000")
