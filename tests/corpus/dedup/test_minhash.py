"""MinHash: shingles, signatures that estimate Jaccard without bias, banding, parameters."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clozeworks.corpus.dedup.minhash import (
    MinHasher,
    Shingler,
    band_keys,
    collision_probability,
    jaccard,
    optimal_param,
    word_spans,
    words,
)


def test_shingles_are_word_ngrams_ignoring_case_and_punctuation() -> None:
    sh = Shingler(3)
    assert words("Hello, World! It's 2024.") == ["hello", "world", "it", "s", "2024"]
    assert len(sh("a b c d e")) == 3
    assert np.array_equal(sh("A b, C d; E"), sh("a b c d e"))
    assert len(sh("two words")) == 1  # fewer words than n: one shingle of them all
    assert len(sh("!!! ...")) == 0
    assert np.array_equal(sh("x y z x y z x y z"), np.unique(sh("x y z x y z x y z")))
    with pytest.raises(ValueError):
        Shingler(0)


@given(st.text(alphabet=st.characters(codec=None), max_size=80))
def test_words_found_in_code_points_are_the_regex_words(text: str) -> None:
    _, starts, ends = word_spans(text)
    folded = text.casefold()
    assert [folded[a:b] for a, b in zip(starts, ends, strict=True)] == words(text)
    assert len(Shingler.word_hashes(text)) == len(words(text))


def test_word_hashes_depend_on_the_word_alone() -> None:
    hashes = Shingler.word_hashes("Tea, tea; eat ATE tea_2 straße STRASSE")
    assert hashes[0] == hashes[1] and hashes[2] != hashes[3] != hashes[0]
    assert hashes[5] == hashes[6]  # case folding: ß is ss
    assert len(set(Shingler.word_hashes(" ".join(f"w{i}" for i in range(5000))))) == 5000


def test_signatures_are_deterministic_across_instances() -> None:
    shingles = Shingler()("the quick brown fox jumps over the lazy dog again and again")
    assert np.array_equal(
        MinHasher(64, seed=7).signature(shingles), MinHasher(64, seed=7).signature(shingles)
    )
    assert not np.array_equal(
        MinHasher(64, seed=7).signature(shingles), MinHasher(64, seed=8).signature(shingles)
    )
    with pytest.raises(ValueError):
        MinHasher(8).signature(np.zeros(0, dtype=np.uint64))


def test_signature_agreement_estimates_jaccard() -> None:
    """Over 400 random pairs, agreement minus true Jaccard has mean ~0 (|bias| < 0.005) and a
    spread no wider than the binomial bound sqrt(J(1-J)/P) allows (<= 0.25/sqrt(256))."""
    rng = np.random.default_rng(0)
    mh = MinHasher(256, seed=1)
    errors = []
    for _ in range(400):
        base = rng.integers(0, 2**63, size=300, dtype=np.uint64)
        k = int(rng.integers(0, 300))
        other = np.concatenate([base[: 300 - k], rng.integers(0, 2**63, size=k, dtype=np.uint64)])
        a, b = np.unique(base), np.unique(other)
        errors.append((mh.signature(a) == mh.signature(b)).mean() - jaccard(a, b))
    errors = np.array(errors)
    assert abs(errors.mean()) < 0.005
    assert errors.std() < 0.5 / 16 * 1.15


def test_band_keys_share_exactly_the_equal_bands() -> None:
    a = np.arange(12, dtype=np.uint32)
    b = a.copy()
    b[5] = 99  # second band of three rows... band 1 covers rows 3..5
    ka, kb = band_keys(a, 4, 3), band_keys(b, 4, 3)
    assert [x == y for x, y in zip(ka, kb, strict=True)] == [True, False, True, True]
    assert len({k[:2] for k in ka}) == 4
    with pytest.raises(ValueError):
        band_keys(a, 5, 3)


def test_optimal_param_matches_text_dedup_and_datasketch() -> None:
    assert optimal_param(0.7, 256) == (25, 10)  # text-dedup's doctest value
    bands, rows = optimal_param(0.8, 256)
    assert bands * rows <= 256
    assert collision_probability(0.9, bands, rows) > 0.97
    assert collision_probability(0.5, bands, rows) < 0.002


def test_jaccard() -> None:
    a = np.array([1, 2, 3, 4], dtype=np.uint64)
    assert jaccard(a, np.array([3, 4, 5, 6], dtype=np.uint64)) == pytest.approx(2 / 6)
    assert jaccard(a, a) == 1.0 and jaccard(np.zeros(0, np.uint64), np.zeros(0, np.uint64)) == 1.0
