import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clozeworks.corpus.inspect.stats import Histogram, TokenCounts, log2_edges, padding_waste

lengths_lists = st.lists(st.integers(min_value=0, max_value=300), min_size=1, max_size=400)


@settings(max_examples=60, deadline=None)
@given(values=lengths_lists, split=st.integers(min_value=0, max_value=400))
def test_histogram_summary_matches_numpy_and_merges(values, split) -> None:
    a, b = Histogram(dense_limit=128), Histogram(dense_limit=128)
    a.add(np.array(values[:split], dtype=np.int64))
    b.add(np.array(values[split:], dtype=np.int64))
    a.merge(b)
    s = a.summary(histogram=True)
    arr = np.array(values)
    assert s["count"] == len(values)
    assert (s["min"], s["max"]) == (arr.min(), arr.max())
    assert s["mean"] == pytest.approx(arr.mean())
    for key, q in (("p50", 50), ("p95", 95)):
        assert s[key] == np.percentile(arr, q, method="inverted_cdf")
    assert dict(map(tuple, s["histogram"])) == dict(
        zip(*np.unique(arr, return_counts=True), strict=True)
    )
    assert a.total == arr.sum()


def test_histogram_binned_and_refuses_negative() -> None:
    h = Histogram()
    h.add(np.array([0, 1, 3, 4, 7, 8, 100_000]))
    edges = log2_edges(100_000)
    counts = h.binned(edges)
    assert sum(counts) == 7 and counts[:5] == [1, 1, 1, 2, 1]
    with pytest.raises(ValueError, match=">= 0"):
        h.add(np.array([-1]))
    assert Histogram().summary() == {
        "count": 0,
        "min": None,
        "mean": None,
        "p50": None,
        "p95": None,
        "max": None,
    }


def sorted_batch_waste(lengths: np.ndarray, batch: int) -> float:
    s = np.sort(lengths)
    slots = sum(
        chunk.max() * len(chunk) for chunk in np.array_split(s, range(batch, len(s), batch))
    )
    return 1 - s.sum() / slots


@pytest.mark.parametrize("batch", [1, 4, 32])
def test_padding_waste_agrees_with_simulated_batches(batch) -> None:
    rng = np.random.default_rng(7)
    lengths = np.where(rng.random(5000) < 0.2, 128, rng.integers(5, 128, 5000))
    h = Histogram()
    h.add(lengths)
    w = padding_waste(h, batch, 128)
    assert w["static"] == pytest.approx(1 - lengths.mean() / 128)
    assert w["bucketed"] == pytest.approx(sorted_batch_waste(lengths, batch))
    # Random batches (sampled from the same distribution): 40k batches put the ratio
    # estimate within ~0.002 of its expectation; 0.01 is > 5 standard errors.
    draws = rng.choice(lengths, size=(40_000, batch))
    simulated = 1 - draws.sum() / (draws.max(axis=1).sum() * batch)
    assert w["dynamic"] == pytest.approx(simulated, abs=0.01)
    if batch == 1:
        assert w["dynamic"] == pytest.approx(0.0) and w["bucketed"] == pytest.approx(0.0)
    assert w["bucketed"] <= w["dynamic"] <= w["static"]


def test_token_counts_flush_and_out_of_vocab() -> None:
    c = TokenCounts(10)
    c.FLUSH_TOKENS = 4  # type: ignore[misc]
    for chunk in ([1, 2, 2], [3, 12, 2], [0]):
        c.add(np.array(chunk, dtype=np.uint16))
    other = TokenCounts(10)
    other.add(np.array([9, 9], dtype=np.uint16))
    c.merge(other)
    s = c.summary({"[PAD]": 0, "[UNK]": 1}, 1, str, top_k=2)
    assert c.counts.tolist() == [1, 1, 3, 1, 0, 0, 0, 0, 0, 2]
    assert s["out_of_vocab"] == 1
    assert [e["id"] for e in s["top"]] == [2, 9]
    # content = all 8 in-vocabulary tokens but [PAD]; [UNK] counts as content.
    assert s["content_tokens"] == 7 and s["unk_rate"] == pytest.approx(1 / 7)
    # ids 4..8 are never used, of the 8 ordinary ids 2..9.
    assert s["never_used"] == 5 and s["never_used_share"] == pytest.approx(5 / 8)
    assert s["special"] == {"[PAD]": 1, "[UNK]": 1}
    assert s["rank_frequency"][0] == [1, 3] and s["rank_frequency"][-1][0] == s["distinct"]
