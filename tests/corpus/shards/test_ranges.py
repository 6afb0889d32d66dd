import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from clozeworks.corpus.shards.ranges import gather, offsets, range_positions


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 10)), max_size=20))
def test_gather_is_the_slices_concatenated(spans) -> None:
    source = np.arange(100, 160)
    starts = np.array([s for s, _ in spans], dtype=np.int64)
    lengths = np.array([n for _, n in spans], dtype=np.int64)
    expected = [t for s, n in spans for t in source[s : s + n].tolist()]
    assert gather(source, starts, lengths).tolist() == expected
    assert len(range_positions(starts, lengths)) == sum(n for _, n in spans)
    assert offsets(lengths).tolist() == [0, *np.cumsum(lengths).tolist()]
