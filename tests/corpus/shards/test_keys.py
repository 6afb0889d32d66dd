"""Derived keys and the random numbers drawn from them. Tolerances: chi-square over 64
cells with 63 degrees of freedom stays under 120 with probability 1 - 1e-5; a mean of
200,000 uniforms is within 0.005 of 1/2 (about 8 standard errors)."""

import numpy as np
import pytest

from clozeworks.corpus.shards.keys import (
    below,
    derive,
    random_bits,
    string_key,
    string_keys,
    uniform,
)


def _chi_square(cells: np.ndarray) -> float:
    expected = cells.sum() / len(cells)
    return float(((cells - expected) ** 2 / expected).sum())


def test_string_keys_are_stable_and_seeded() -> None:
    assert string_key(1, "doc") == string_key(1, "doc") != string_key(2, "doc")
    assert string_keys(1, ["a", "doc"]).tolist() == [string_key(1, "a"), string_key(1, "doc")]


def test_derived_keys_are_uniform_distinct_and_depend_on_every_field() -> None:
    docs = string_keys(0, [f"d{i}" for i in range(2000)])
    keys = derive(np.repeat(docs, 100), 0, np.tile(np.arange(100), 2000), 3)
    assert len(np.unique(keys)) == len(keys)
    assert _chi_square(np.bincount((keys >> np.uint64(58)).astype(np.int64), minlength=64)) < 120
    assert _chi_square(np.bincount((keys & np.uint64(63)).astype(np.int64), minlength=64)) < 120
    one = docs[:1]
    assert len({int(derive(one, a, b)[0]) for a in range(3) for b in range(3)}) == 9
    assert derive(one, 1, 2)[0] != derive(one, 2, 1)[0]
    assert derive(docs, 5).tolist() == derive(docs, np.full(len(docs), 5)).tolist()
    # int fields take a Python-int path; arrays of the same values give the same keys
    for field in (-1, -(2**40), 2**62, 2**63 + 5, np.int64(7)):
        array = np.full(len(docs), field, dtype=np.uint64 if field >= 2**63 else np.int64)
        assert derive(docs, field).tolist() == derive(docs, array).tolist(), field
    assert derive(derive(docs, 4, 2), 9).tolist() == derive(docs, 4, 2, 9).tolist()


def test_uniform_below_and_coin_flips() -> None:
    keys = derive(np.arange(200_000, dtype=np.uint64), 11)
    u = uniform(keys)
    assert ((u >= 0) & (u < 1)).all() and abs(u.mean() - 0.5) < 0.005
    n = np.arange(200_000) % 7 + 1
    b = below(keys, n)
    assert ((b >= 0) & (b < n)).all()
    assert _chi_square(np.bincount(below(keys, 64), minlength=64)) < 120
    flips = np.array([0, 1, 63, 64, 65, 200] * 20_000)
    heads = random_bits(keys[: len(flips)], flips)
    assert ((heads >= 0) & (heads <= flips)).all() and heads[flips == 0].max() == 0
    for count in (1, 64, 65, 200):  # Binomial(count, 1/2): mean count / 2, sd sqrt(count) / 2
        mean = heads[flips == count].mean()
        assert mean == pytest.approx(count / 2, abs=8 * np.sqrt(count) / 2 / np.sqrt(20_000))
