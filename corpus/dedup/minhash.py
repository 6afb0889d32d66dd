"""MinHash signatures over word n-grams, LSH banding, and true Jaccard similarity.

A document's shingles are its word n-grams (n=5 by default; a document with fewer words has
one shingle of all of them), each hashed to 64 bits. A signature holds, for each of
`num_perm` seeded hash functions (rensa's RMinHash), the 32-bit minimum over the
shingles; two signatures agree in position i with probability equal to the Jaccard
similarity of the shingle sets. LSH cuts the signature into `bands` bands of `rows`
values; documents sharing any band are candidates. `optimal_param` picks bands and rows for
a threshold the way datasketch and text-dedup do.

Everything is vectorized (numpy, rensa); hashes are deterministic (splitmix64 over code
points, rensa's seeded permutations), never Python's salted `hash`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import numpy as np
import rensa

_WORD = re.compile(r"\w+")
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_STEP = np.uint64(0x9E3779B97F4A7C15)  # multiplier that combines word hashes into an n-gram
# rensa's MinHash algorithm that signatures (and so which documents dedup keeps) are made
# with; a rensa that changes it changes outputs, so it is refused.
RENSA_ALGORITHM = 2
# Keys a character's hash by its place in the word, so "ab" and "ba" differ.
_POSITION = np.uint64(0xD6E8FEB86659FD93)
# Keys a band's rows by position likewise (splitmix64's increments, enough for any band).
_ROW_KEYS = np.arange(1, 1025, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)


def _mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, elementwise: spreads every input bit over the output."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def words(text: str) -> list[str]:
    """Lowercased word tokens (letters, digits, underscore); punctuation and spacing ignored."""
    return _WORD.findall(text.casefold())


@functools.cache
def _word_characters() -> np.ndarray:
    """bool [0x110000]: which code points `\\w` matches (str.isalnum() or "_", as `re`
    defines it for str patterns)."""
    table = np.fromiter((chr(c).isalnum() for c in range(0x110000)), dtype=bool, count=0x110000)
    table[ord("_")] = True
    return table


def _folded(text: str) -> tuple[np.ndarray, np.ndarray]:
    """(code points of `text` case-folded, whether each is a word character)."""
    points = np.frombuffer(text.casefold().encode("utf-32-le", "surrogatepass"), dtype="<u4")
    return points, _word_characters()[points]


def _spans(is_word: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of each run of word characters."""
    inside = np.zeros(len(is_word) + 2, dtype=bool)
    inside[1:-1] = is_word
    edges = np.flatnonzero(inside[1:] != inside[:-1])
    return edges[0::2], edges[1::2]


def word_spans(text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(code points of `text` case-folded, start and end of each `words` word in them)."""
    points, is_word = _folded(text)
    return points, *_spans(is_word)


class Shingler:
    """Text -> sorted unique uint64 hashes of its word n-grams.

    Words are `words(text)`, found and hashed in numpy over the text's code points (1.7x
    the regex and a dictionary of blake2b digests it replaced): a word's hash is splitmix64
    of the sum of splitmix64(code point + position * K) over its characters."""

    def __init__(self, ngram: int = 5) -> None:
        if ngram < 1:
            raise ValueError(f"ngram must be >= 1, got {ngram}")
        self.ngram = ngram

    @staticmethod
    def word_hashes(text: str) -> np.ndarray:
        points, is_word = _folded(text)
        starts, ends = _spans(is_word)
        lengths = ends - starts
        first = np.cumsum(lengths) - lengths  # each word's start among the word characters
        inside = points[is_word].astype(np.uint64)
        position = np.arange(len(inside), dtype=np.uint64) - np.repeat(first, lengths).astype(
            np.uint64
        )
        with np.errstate(over="ignore"):
            return _mix64(np.add.reduceat(_mix64(inside + position * _POSITION), first))

    def __call__(self, text: str) -> np.ndarray:
        hashed = self.word_hashes(text)
        if len(hashed) == 0:
            return np.zeros(0, dtype=np.uint64)
        n = min(self.ngram, len(hashed))
        count = len(hashed) - n + 1
        grams = np.zeros(count, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for k in range(n):
                grams = grams * _STEP + hashed[k : k + count]
            grams = np.sort(_mix64(grams))
        # np.unique hashes, 10x slower than this on a few hundred values.
        return grams[np.concatenate(([True], grams[1:] != grams[:-1]))]


class MinHasher:
    """Signatures of `num_perm` 32-bit minima, the same for the same seed in every process:
    rensa's RMinHash (Rust, MIT) over our shingle hashes, 12-38x the numpy matrix product
    this replaced (bench/dedup). Its permutations are rensa's, so the signatures are
    defined by rensa's algorithm version, checked here (`RENSA_ALGORITHM`)."""

    def __init__(self, num_perm: int = 256, seed: int = 42) -> None:
        if num_perm < 1:
            raise ValueError(f"num_perm must be >= 1, got {num_perm}")
        found = rensa.RMinHash.ALGORITHM_VERSION
        if found != RENSA_ALGORITHM:
            raise RuntimeError(
                f"rensa's MinHash algorithm is version {found}; clozeworks' dedup output is "
                f"defined by version {RENSA_ALGORITHM}: install the rensa constraints.txt names"
            )
        self.num_perm = num_perm
        self.seed = seed

    def signature(self, shingles: np.ndarray) -> np.ndarray:
        """uint32 [num_perm] minima over `shingles` (non-empty uint64 array)."""
        if len(shingles) == 0:
            raise ValueError("a document without shingles has no signature")
        offsets = np.array([0, len(shingles)], dtype=np.uint64)
        matrix = rensa.RMinHash.digest_matrix_from_flat_token_hashes(
            np.ascontiguousarray(shingles, dtype=np.uint64), offsets, self.num_perm, self.seed
        )
        return np.array(matrix.to_rows()[0], dtype=np.uint32)


def band_keys(signature: np.ndarray, bands: int, rows: int) -> list[bytes]:
    """One key per band: band number (2 bytes) + a 64-bit hash of its rows, splitmix64
    over the rows keyed by position (bands must fit)."""
    if bands * rows > len(signature):
        raise ValueError(f"{bands} bands x {rows} rows need {bands * rows} hashes")
    grid = signature[: bands * rows].astype(np.uint64).reshape(bands, rows)
    with np.errstate(over="ignore"):
        digest = _mix64((_mix64(grid + _ROW_KEYS[:rows]) * _STEP).sum(axis=1, dtype=np.uint64))
    keys = np.empty((bands, 10), dtype=np.uint8)
    keys[:, :2] = np.arange(bands, dtype=">u2").view(np.uint8).reshape(bands, 2)
    keys[:, 2:] = digest.astype("<u8").view(np.uint8).reshape(bands, 8)
    flat = keys.tobytes()
    return [flat[i : i + 10] for i in range(0, 10 * bands, 10)]


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """|A ∩ B| / |A ∪ B| of two sorted unique shingle arrays (1.0 for two empty sets)."""
    if len(a) == 0 and len(b) == 0:
        return 1.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)


def collision_probability(s: float, bands: int, rows: int) -> float:
    """Chance that two documents of Jaccard similarity `s` share at least one band."""
    return float(1.0 - (1.0 - s**rows) ** bands)


def _integral(f: Callable[[np.ndarray], np.ndarray], lo: float, hi: float) -> float:
    """Composite Simpson's rule on 2000 intervals (smooth integrands; error ~1e-12)."""
    if hi <= lo:
        return 0.0
    x = np.linspace(lo, hi, 2001)
    y = f(x)
    h = (hi - lo) / 2000
    return float(h / 3 * (y[0] + y[-1] + 4 * y[1:-1:2].sum() + 2 * y[2:-1:2].sum()))


def optimal_param(
    threshold: float,
    num_perm: int,
    false_positive_weight: float = 0.5,
    false_negative_weight: float = 0.5,
) -> tuple[int, int]:
    """(bands, rows) with bands * rows <= num_perm minimizing the weighted areas under the
    collision curve below `threshold` (false positives) and above it (false negatives).

    The search of datasketch's `_optimal_param`, as text-dedup uses it; datasketch and
    text-dedup integrate with scipy's `quad`, this with Simpson's rule, which finds the same
    optimum: (25, 10) for threshold 0.7 and 256 permutations.
    """
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    best, best_error = (1, 1), float("inf")
    for bands in range(1, num_perm + 1):
        for rows in range(1, num_perm // bands + 1):

            def hit(s: np.ndarray, b: int = bands, r: int = rows) -> np.ndarray:
                return 1.0 - (1.0 - s**r) ** b

            def miss(s: np.ndarray, b: int = bands, r: int = rows) -> np.ndarray:
                return (1.0 - s**r) ** b

            error = false_positive_weight * _integral(
                hit, 0.0, threshold
            ) + false_negative_weight * _integral(miss, threshold, 1.0)
            if error < best_error:
                best, best_error = (bands, rows), error
    return best
