import numpy as np
from hypothesis import example, given
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


@given(
    st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 6)), max_size=12),
    st.sampled_from([0, 2**31 - 8, 2**31]),
)
@example(spans=[(3, 6)], base=2**31 - 8)  # starts below 2**31, the last position past it
def test_positions_are_the_ranges_whatever_their_size(spans, base) -> None:
    """int32 positions where everything fits, int64 past 2**31, the same values."""
    starts = np.array([s % 1000 + base for s, _ in spans], dtype=np.int64)
    lengths = np.array([n for _, n in spans], dtype=np.int64)
    got = range_positions(starts, lengths)
    assert got.tolist() == [
        s + i for s, n in zip(starts.tolist(), lengths.tolist(), strict=True) for i in range(n)
    ]
    last = int((starts + lengths).max(initial=0))  # one past the last position
    assert got.dtype == (np.int32 if last <= 2**31 else np.int64)
