"""Which documents a vocabulary is trained on, and which it is measured on.

Every document gets a score in [0, 1) from a hash of (seed, id). Documents scoring below the
training rate form the training sample; those scoring at or above 1 - the held-out rate form
the held-out sample. Both are fixed by the seed and the ids alone (not by file order, workers
or runner), disjoint, and nested: a larger sample contains every smaller one of the same seed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from clozeworks.schemas.errors import SettingError, UsageError
from clozeworks.schemas.settings import DEFAULT_SEED, SEEDS, check_choices, setting

# SentencePiece's advice is about 10M sentences; 1 GB of text is of that order and keeps the
# trainer's word table in a few GB of memory on any corpus.
DEFAULT_SAMPLE_BYTES = 1_000_000_000
# Enough held-out documents for UNK rate and tokens per word to two significant digits,
# but never more than this share of the corpus (small corpora need their text for training).
DEFAULT_HELDOUT_DOCS = 1000
MAX_HELDOUT_SHARE = 0.05

TRAIN = "train"
HELDOUT = "heldout"


def sample_score(seed: int, doc_id: str) -> float:
    """A document's place in the deterministic sample: uniform in [0, 1) from (seed, id)."""
    digest = hashlib.blake2b(f"{seed}\x00{doc_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


@dataclass(frozen=True)
class SampleRates:
    """The share of documents trained on, and the share held out to measure the vocabulary."""

    seed: int
    train: float
    heldout: float

    def __post_init__(self) -> None:
        if not (0.0 <= self.train <= 1.0 and 0.0 <= self.heldout <= 1.0):
            raise ValueError(f"rates must lie in [0, 1]: {self}")
        if self.train + self.heldout > 1.0 + 1e-12:
            raise ValueError(f"training and held-out samples overlap: {self}")

    def bucket(self, doc_id: str) -> str | None:
        """TRAIN, HELDOUT or None (in neither sample) for one document."""
        score = sample_score(self.seed, doc_id)
        if score < self.train:
            return TRAIN
        if score >= 1.0 - self.heldout:
            return HELDOUT
        return None

    def masks(self, ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Boolean masks over `ids`: in the training sample, in the held-out sample."""
        scores = np.fromiter((sample_score(self.seed, i) for i in ids), float, len(ids))
        return scores < self.train, scores >= 1.0 - self.heldout


def plan_rates(
    documents: int,
    text_bytes: int,
    seed: int = DEFAULT_SEED,
    sample_docs: int | None = None,
    sample_bytes: int | None = DEFAULT_SAMPLE_BYTES,
    heldout_docs: int = DEFAULT_HELDOUT_DOCS,
) -> SampleRates:
    """Rates that give about `sample_docs` documents and about `sample_bytes` bytes of text
    (whichever is smaller; None or 0 means no limit) out of a store of `documents` documents
    and `text_bytes` bytes, after setting aside about `heldout_docs` for measurement."""
    for name, value in (
        ("sample_docs", sample_docs),
        ("sample_bytes", sample_bytes),
        ("heldout_docs", heldout_docs),
    ):
        if value is not None and value < 0:
            raise SettingError(name, f"must not be negative (got {value})")
    if documents <= 0:
        return SampleRates(seed=seed, train=1.0, heldout=0.0)
    heldout = min(heldout_docs / documents, MAX_HELDOUT_SHARE)
    train = 1.0 - heldout
    if sample_docs:
        train = min(train, sample_docs / documents)
    if sample_bytes and text_bytes > 0:
        train = min(train, sample_bytes / text_bytes)
    return SampleRates(seed=seed, train=train, heldout=heldout)


def parse_size(text: str) -> int:
    """`1500`, `500M`, `2G`, `1.5GB` -> bytes (powers of 1000). UsageError if unreadable."""
    units = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    s = text.strip().upper().removesuffix("B")
    number, unit = (s[:-1], s[-1]) if s and s[-1] in units else (s, "")
    try:
        value = float(number)
    except ValueError:
        raise UsageError(f"{text!r} is not a size (examples: 800000, 500M, 2G)") from None
    if value < 0:
        raise UsageError(f"{text!r}: a size must not be negative")
    return int(value * units[unit])


@dataclass(frozen=True)
class SampleSettings:
    """What a vocabulary is trained and measured on."""

    sample_docs: int | None = setting(None, "train on about N documents", metavar="N")
    # 0 (or None): the whole store.
    sample_bytes: int | None = setting(
        DEFAULT_SAMPLE_BYTES,
        "train on about this much text, e.g. 500M, 2G; 0 for all (default 1G)",
        metavar="SIZE",
        parse=parse_size,
    )
    seed: int = setting(DEFAULT_SEED, "seed of the samples", bounds=SEEDS)
    heldout_docs: int = setting(
        DEFAULT_HELDOUT_DOCS,
        "documents held out to measure the vocabulary (at most 5% of the store)",
        metavar="N",
    )

    def __post_init__(self) -> None:
        check_choices(self)
        if self.sample_docs is not None and self.sample_docs <= 0:
            raise SettingError("sample_docs", f"must be positive (got {self.sample_docs})")

    def rates(self, documents: int, text_bytes: int) -> SampleRates:
        return plan_rates(
            documents,
            text_bytes,
            seed=self.seed,
            sample_docs=self.sample_docs,
            sample_bytes=self.sample_bytes,
            heldout_docs=self.heldout_docs,
        )
