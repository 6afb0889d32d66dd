"""Gopher's quality and repetition rules (Rae et al. 2021, "Scaling Language Models: Methods,
Analysis & Insights from Training Gopher", Appendix A.1.1 and Table A1). Defaults are the
paper's; the exact counting follows datatrove's `GopherQualityFilter` and
`GopherRepetitionFilter`, so results can be compared with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from clozeworks.corpus.text.filters.base import FilterResult
from clozeworks.corpus.text.filters.languages import (
    ENGLISH,
    ENGLISH_STOP_WORDS,
    LanguageSettings,
    words_of,
)
from clozeworks.corpus.text.filters.text import (
    duplicates,
    nonempty_lines,
    paragraphs,
    split_words,
    word_counts,
)

STOP_WORDS = ENGLISH_STOP_WORDS  # the paper's eight


@dataclass(frozen=True)
class GopherQualityFilter:
    """Word count, mean word length, symbol ratios, bullet and ellipsis lines, alphabetic
    words and stop words (Gopher A.1.1)."""

    name: ClassVar[str] = "gopher-quality"
    min_words: int = field(default=50, metadata={"help": "fewest non-symbol words"})
    max_words: int = field(default=100_000, metadata={"help": "most non-symbol words"})
    min_mean_word_length: float = field(default=3.0, metadata={"help": "in characters"})
    max_mean_word_length: float = field(default=10.0, metadata={"help": "in characters"})
    max_symbol_word_ratio: float = field(default=0.1, metadata={"help": "'#' or ellipses per word"})
    max_bullet_lines_ratio: float = field(
        default=0.9, metadata={"help": "share of lines starting with a bullet"}
    )
    max_ellipsis_lines_ratio: float = field(
        default=0.3, metadata={"help": "share of lines ending with an ellipsis"}
    )
    min_alpha_words_ratio: float = field(
        default=0.8, metadata={"help": "share of words with a letter"}
    )
    min_stop_words: int = field(
        default=2, metadata={"help": "distinct stop words of the document's language required"}
    )

    def filter(self, text: str) -> FilterResult:
        return self.filter_in(text, ENGLISH)

    def filter_in(self, text: str, language: LanguageSettings) -> FilterResult:
        """The rules `language` allows: without spaces between words only the line rules;
        without stop words or word-length settings, not those rules."""
        lines = text.splitlines()
        if not language.word_rules:
            return self._line_rules(lines)
        tokens = words_of(text, language)
        counts = word_counts(split_words(text) if tokens is None else tokens)
        n_words = counts.words + counts.symbols
        words_scale = language.word_count_scale
        if not counts.words or counts.words < self.min_words * words_scale:
            return FilterResult.drop("too_few_words")
        if counts.words > self.max_words * words_scale:
            return FilterResult.drop("too_many_words")
        mean_length = counts.chars / counts.words
        scale = language.word_length_scale
        if scale is not None and mean_length < self.min_mean_word_length * scale:
            return FilterResult.drop("short_words")
        if scale is not None and mean_length > self.max_mean_word_length * scale:
            return FilterResult.drop("long_words")
        if text.count("#") / n_words > self.max_symbol_word_ratio:
            return FilterResult.drop("hash_ratio")
        if (text.count("...") + text.count("…")) / n_words > self.max_symbol_word_ratio:
            return FilterResult.drop("ellipsis_ratio")
        by_lines = self._line_rules(lines)
        if not by_lines.keep:
            return by_lines
        alpha = counts.words - counts.without_letter
        if alpha / n_words < self.min_alpha_words_ratio + language.alpha_words_shift:
            return FilterResult.drop("alpha_words")
        if language.stop_words is not None:
            longest = language.longest_stop_word
            lowered = {w.lower() for w in counts.distinct if len(w) <= longest}
            if len(language.stop_words & lowered) < self.min_stop_words:
                return FilterResult.drop("stop_words")
        return FilterResult.kept()

    def _line_rules(self, lines: list[str]) -> FilterResult:
        if not lines:
            return FilterResult.drop("too_few_words")
        bullets = sum(line.lstrip().startswith(("•", "-")) for line in lines)
        if bullets / len(lines) > self.max_bullet_lines_ratio:
            return FilterResult.drop("bullet_lines")
        ellipses = sum(line.rstrip().endswith(("...", "…")) for line in lines)
        if ellipses / len(lines) > self.max_ellipsis_lines_ratio:
            return FilterResult.drop("ellipsis_lines")
        return FilterResult.kept()


@dataclass(frozen=True)
class GopherRepetitionFilter:
    """Duplicate lines and paragraphs, and characters inside repeated n-grams (Table A1)."""

    name: ClassVar[str] = "gopher-repetition"
    dup_line_frac: float = field(default=0.30, metadata={"help": "duplicate lines / lines"})
    dup_para_frac: float = field(
        default=0.30, metadata={"help": "duplicate paragraphs / paragraphs"}
    )
    dup_line_char_frac: float = field(
        default=0.20, metadata={"help": "chars in duplicate lines / chars"}
    )
    dup_para_char_frac: float = field(
        default=0.20, metadata={"help": "chars in duplicate paragraphs / chars"}
    )
    top_2gram_frac: float = field(default=0.20, metadata={"help": "chars in the top 2-gram"})
    top_3gram_frac: float = field(default=0.18, metadata={"help": "chars in the top 3-gram"})
    top_4gram_frac: float = field(default=0.16, metadata={"help": "chars in the top 4-gram"})
    dup_5gram_frac: float = field(default=0.15, metadata={"help": "chars in repeated 5-grams"})
    dup_6gram_frac: float = field(default=0.14, metadata={"help": "chars in repeated 6-grams"})
    dup_7gram_frac: float = field(default=0.13, metadata={"help": "chars in repeated 7-grams"})
    dup_8gram_frac: float = field(default=0.12, metadata={"help": "chars in repeated 8-grams"})
    dup_9gram_frac: float = field(default=0.11, metadata={"help": "chars in repeated 9-grams"})
    dup_10gram_frac: float = field(default=0.10, metadata={"help": "chars in repeated 10-grams"})

    def filter(self, text: str) -> FilterResult:
        return self.filter_in(text, ENGLISH)

    def filter_in(self, text: str, language: LanguageSettings) -> FilterResult:
        """Duplicate paragraphs and lines for every language; the word n-gram rules where
        words are spaced (without spaces a "word" is a whole run of text)."""
        size = len(text)
        if not size:
            return FilterResult.drop("empty")
        paras = paragraphs(text)
        count, chars = duplicates(paras)
        if count / len(paras) > self.dup_para_frac:
            return FilterResult.drop("dup_para_frac")
        if chars / size > self.dup_para_char_frac:
            return FilterResult.drop("dup_para_char_frac")
        lines = nonempty_lines(text)
        count, chars = duplicates(lines)
        if count / len(lines) > self.dup_line_frac:
            return FilterResult.drop("dup_line_frac")
        if chars / size > self.dup_line_char_frac:
            return FilterResult.drop("dup_line_char_frac")
        words = words_of(text, language) if language.word_rules else []
        if words is None:  # spaced: split here
            words = split_words(text)
        if len(words) < 2:
            return FilterResult.kept()
        ids, lengths = _word_ids(words)
        # A repeated n-gram covers its words and the spaces between them; a segmenter's
        # words (Chinese, Japanese) have none between them.
        gap = 1 if language.segmenter is None else 0
        tops = ((2, self.top_2gram_frac), (3, self.top_3gram_frac), (4, self.top_4gram_frac))
        for n, limit in tops:
            if len(words) >= n and top_ngram_chars(ids, lengths, n, gap) / size > limit:
                return FilterResult.drop(f"top_{n}gram")
        dup_limits = (
            self.dup_5gram_frac,
            self.dup_6gram_frac,
            self.dup_7gram_frac,
            self.dup_8gram_frac,
            self.dup_9gram_frac,
            self.dup_10gram_frac,
        )
        for n, limit in enumerate(dup_limits, start=5):
            budget = limit * size
            if len(words) >= n and duplicate_ngram_chars(ids, lengths, n, budget) > budget:
                return FilterResult.drop(f"dup_{n}gram")
        return FilterResult.kept()


def _word_ids(words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each word as a small integer (equal words, equal ids) and its length."""
    vocab: dict[str, int] = {}
    ids = np.fromiter((vocab.setdefault(w, len(vocab)) for w in words), np.int64, len(words))
    lengths = np.fromiter(map(len, words), np.int64, len(words))
    return ids, lengths


def _ngram_keys(ids: np.ndarray, n: int) -> np.ndarray:
    """One uint64 per n-gram position, equal for equal n-grams (a polynomial hash mod 2^64;
    collisions need 2^32 distinct n-grams to be likely)."""
    keys = np.zeros(len(ids) - n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            keys = keys * np.uint64(0x9E3779B97F4A7C15) + ids[k : len(ids) - n + 1 + k].astype(
                np.uint64
            )
    return keys


def _ngram_lengths(lengths: np.ndarray, n: int) -> np.ndarray:
    sums = np.concatenate(([0], np.cumsum(lengths)))
    return sums[n:] - sums[:-n]


def top_ngram_chars(ids: np.ndarray, lengths: np.ndarray, n: int, gap: int = 1) -> int:
    """Characters covered by the most frequent n-gram, counted with its repeats and the
    `gap` characters between its words (the first one to reach the top count wins ties)."""
    keys = _ngram_keys(ids, n)
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    top = counts.max()
    winner = first[counts == top].min()
    return int(top * (_ngram_lengths(lengths, n)[winner] + gap * (n - 1)))


def duplicate_ngram_chars(ids: np.ndarray, lengths: np.ndarray, n: int, stop_above: float) -> int:
    """Characters in n-grams seen earlier in the document, scanning left to right and jumping
    past each repeat so overlapping repeats count once; stops early past `stop_above`."""
    keys = _ngram_keys(ids, n).tolist()
    chars = _ngram_lengths(lengths, n).tolist()
    seen: set[int] = set()
    total, i, end = 0, 0, len(keys)
    while i < end:
        key = keys[i]
        if key in seen:
            total += chars[i]
            if total > stop_above:
                return total
            i += n
        else:
            seen.add(key)
            i += 1
    return total
