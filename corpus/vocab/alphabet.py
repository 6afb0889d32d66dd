"""Character counts, and the WordPiece alphabet chosen from them.

Why this exists: `tokenizers`' WordPiece trainer is not deterministic (huggingface/tokenizers
#1794). It gives `##c` pieces their ids in hash-map order, which is random per process, and
breaks ties between merges of equal count by those ids; its `limit_alphabet` cut also breaks
ties in hash order. The same text then gives a different vocabulary on every run. We choose
the alphabet here, from character counts with ties broken by code point, and hand the trainer
every `##c` up front in sorted order, so nothing is left to hash order.

Counting is per raw character (numpy, a few hundred MB/s); BERT's normalizer works character
by character (clean-up, CJK spacing, NFD accent stripping, lowercasing), so the counts of the
normalized characters follow exactly from the raw ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from clozeworks.corpus.vocab.scripts import script_of_char

# Characters are counted in batches of about this many, so numpy's per-call cost vanishes.
_FLUSH_CHARS = 1 << 20


class CharCounter:
    """Counts characters of many texts; mergeable, so a Beam CombineFn can use it."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._pending: list[str] = []
        self._pending_chars = 0

    def add(self, text: str) -> None:
        self._pending.append(text)
        self._pending_chars += len(text)
        if self._pending_chars >= _FLUSH_CHARS:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        joined = "".join(self._pending)
        self._pending, self._pending_chars = [], 0
        # Slices bound the uint32 copy to 4 bytes per character of one slice.
        for start in range(0, len(joined), _FLUSH_CHARS):
            self._count(joined[start : start + _FLUSH_CHARS])

    def _count(self, text: str) -> None:
        # Code points as uint32; "surrogatepass" keeps a lone surrogate countable, not fatal.
        points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
        per_point = np.bincount(points)
        present = np.flatnonzero(per_point)
        for point, count in zip(present.tolist(), per_point[present].tolist(), strict=True):
            self.counts[chr(point)] += count

    def merge(self, other: CharCounter) -> None:
        other.flush()
        self.flush()
        self.counts.update(other.counts)

    def result(self) -> dict[str, int]:
        self.flush()
        return dict(self.counts)


def char_counts(texts: Iterable[str]) -> dict[str, int]:
    """How often each character occurs in `texts`."""
    counter = CharCounter()
    for text in texts:
        counter.add(text)
    return counter.result()


@dataclass(frozen=True)
class AlphabetPlan:
    """What the WordPiece trainer is told, so that its output depends on the text alone."""

    # Normalized characters kept, sorted by code point.
    alphabet: tuple[str, ...]
    # "##c" for every kept character that can continue a word, sorted.
    continuations: tuple[str, ...]
    # Distinct normalized characters in the text, before the limit.
    seen: int


def plan_alphabet(
    raw_counts: Mapping[str, int], tok: Tokenizer, limit: int | None, prefix: str = "##"
) -> AlphabetPlan:
    """The alphabet the trainer would keep from `raw_counts` (the `limit` most frequent
    normalized characters, ties broken by code point), and its continuation pieces.

    `tok` is the untrained tokenizer: its normalizer and pre-tokenizer decide what a
    character becomes and whether it can sit inside a word (punctuation and CJK never do).
    """
    ranked = _ranked(raw_counts, tok)
    kept = sorted(ch for ch, _ in (ranked if limit is None else ranked[:limit]))
    continuations = tuple(f"{prefix}{ch}" for ch in kept if _continues_a_word(tok, ch))
    return AlphabetPlan(alphabet=tuple(kept), continuations=continuations, seen=len(ranked))


def _ranked(raw_counts: Mapping[str, int], tok: Tokenizer) -> list[tuple[str, int]]:
    """(normalized character, count), most frequent first, ties by code point."""
    normalizer, pre_tokenizer = tok.normalizer, tok.pre_tokenizer
    counts: Counter[str] = Counter()
    for raw, count in raw_counts.items():
        normalized = normalizer.normalize_str(raw) if normalizer is not None else raw
        for ch in normalized:
            # Whitespace is never part of a word: the pre-tokenizer drops it.
            if pre_tokenizer is None or pre_tokenizer.pre_tokenize_str(ch):
                counts[ch] += count
    return sorted(counts.items(), key=_by_count_then_code_point)


# The share of the sample's characters an alphabet should spell. SentencePiece's
# `character_coverage` for rich character sets is 0.9995, but there a missing character is
# one unknown piece; WordPiece makes its whole word [UNK], two or three characters of
# Korean, so keeping the held-out UNK rate under the README's 0.1% takes a tenth of the
# loss. A cut that leaves out more is worth a warning.
CHARACTER_COVERAGE = 0.9999


def alphabet_report(
    raw_counts: Mapping[str, int], tok: Tokenizer, limit: int | None
) -> dict[str, Any]:
    """What `limit` keeps of the sample's characters: `seen` and `kept` characters, the
    share of character occurrences left out (those become [UNK]), the scripts of the left
    out (characters by script, most first), and `limit_for_coverage`, the limit that would
    spell CHARACTER_COVERAGE of the sample."""
    ranked = _ranked(raw_counts, tok)
    counts = np.array([n for _, n in ranked], dtype=np.int64)
    total = int(counts.sum())
    kept = len(ranked) if limit is None else min(limit, len(ranked))
    left = int(counts[kept:].sum())
    needed = int(np.searchsorted(np.cumsum(counts), CHARACTER_COVERAGE * total) + 1)
    scripts = Counter(script_of_char(ch) or "other" for ch, _ in ranked[kept:])
    return {
        "seen": len(ranked),
        "kept": kept,
        "left_out_share": left / total if total else 0.0,
        "left_out_scripts": dict(scripts.most_common()),
        "coverage": CHARACTER_COVERAGE,
        "limit_for_coverage": min(needed, len(ranked)),
    }


def _by_count_then_code_point(item: tuple[str, int]) -> tuple[int, int]:
    return -item[1], ord(item[0])


# Letters to put before a character to see if it continues a word. One is not Latin: the
# uncased normalizer strips combining marks after Latin, Greek and Cyrillic letters, so
# "a" + a Telugu vowel sign is "a", yet after a Telugu letter the sign stays in the word.
_BASES = ("a", "\u0915")  # DEVANAGARI LETTER KA


def _continues_a_word(tok: Tokenizer, ch: str) -> bool:
    """Can `ch` follow a letter inside one word? (base + ch stays one pre-token.)"""
    return any(_one_word(tok, base + ch) for base in _BASES)


def _one_word(tok: Tokenizer, text: str) -> bool:
    normalized = tok.normalizer.normalize_str(text) if tok.normalizer is not None else text
    if tok.pre_tokenizer is None:
        return True
    return [w for w, _ in tok.pre_tokenizer.pre_tokenize_str(normalized)] == [text]
