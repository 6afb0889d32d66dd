import hashlib
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clozeworks.corpus.shards.readahead import ReadAhead


@settings(max_examples=50, deadline=None)
@given(
    data=st.binary(max_size=5000),
    sizes=st.lists(st.integers(min_value=-1, max_value=700), max_size=20),
    chunk=st.integers(min_value=1, max_value=1024),
)
def test_reads_like_the_file_and_hashes_all_of_it(data, sizes, chunk) -> None:
    plain = io.BytesIO(data)
    with ReadAhead(io.BytesIO(data), hashing=True, chunk=chunk) as stream:
        for size in sizes:
            assert stream.read(size) == plain.read(size)
            assert stream.tell() == plain.tell()
        # The digest covers the bytes not read yet too.
        assert stream.hexdigest() == hashlib.sha256(data).hexdigest()


def test_digest_needs_hashing() -> None:
    with ReadAhead(io.BytesIO(b"abc")) as stream, pytest.raises(ValueError):
        stream.hexdigest()
