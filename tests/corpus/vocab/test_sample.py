"""The deterministic training / held-out samples."""

import math

import pytest

from clozeworks.corpus.vocab.sample import SampleRates, parse_size, plan_rates
from clozeworks.schemas.errors import UsageError

IDS = [f"doc-{i}" for i in range(20_000)]


def test_sample_sizes_are_binomial() -> None:
    rates = SampleRates(seed=7, train=0.3, heldout=0.05)
    train, held = rates.masks(IDS)
    n = len(IDS)
    for mask, p in ((train, 0.3), (held, 0.05)):
        # Within 4 standard deviations of n*p: fails by chance less than once in 10^4 runs.
        assert abs(int(mask.sum()) - n * p) < 4 * math.sqrt(n * p * (1 - p))
    assert not (train & held).any()


def test_samples_depend_on_seed_and_id_only_and_nest() -> None:
    small, _ = SampleRates(seed=1, train=0.1, heldout=0.0).masks(IDS)
    large, _ = SampleRates(seed=1, train=0.4, heldout=0.0).masks(IDS)
    reordered, _ = SampleRates(seed=1, train=0.1, heldout=0.0).masks(IDS[::-1])
    other_seed, _ = SampleRates(seed=2, train=0.1, heldout=0.0).masks(IDS)
    assert (small <= large).all()  # a larger sample holds every smaller one
    assert (reordered[::-1] == small).all()
    assert (other_seed != small).sum() > 1000
    assert SampleRates(1, 0.1, 0.0).bucket("doc-5") == SampleRates(1, 0.1, 0.0).bucket("doc-5")


def test_plan_rates() -> None:
    # Held out: 1000 of 100k docs; the rest trained on unless a limit says otherwise.
    assert plan_rates(100_000, 10**9, sample_bytes=None) == SampleRates(12345, 0.99, 0.01)
    # Small stores give at most 5% to the held-out sample.
    assert plan_rates(1000, 10**6, sample_bytes=None).heldout == 0.05
    # The smaller of the two limits wins.
    r = plan_rates(100_000, 10**9, sample_docs=50_000, sample_bytes=10**8)
    assert r.train == pytest.approx(0.1)
    assert plan_rates(100_000, 10**9, sample_docs=5000, sample_bytes=10**8).train == 0.05
    assert plan_rates(10, 100, heldout_docs=0).heldout == 0.0
    with pytest.raises(UsageError, match="sample_docs"):
        plan_rates(10, 100, sample_docs=-1)


def test_parse_size() -> None:
    assert parse_size("1500") == 1500
    assert parse_size("500M") == 500_000_000 and parse_size("2g") == 2 * 10**9
    assert parse_size("1.5GB") == 1_500_000_000 and parse_size("0") == 0
    for bad in ("lots", "-1G", ""):
        with pytest.raises(UsageError):
            parse_size(bad)
