"""FineWeb's extra quality rules (Penedo et al. 2024, "The FineWeb Datasets", §3.3 and
datatrove's `FineWebQualityFilter`, whose thresholds are the defaults here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from clozeworks.corpus.text.filters.base import FilterResult
from clozeworks.corpus.text.filters.text import duplicates, split_words, terminal_punctuation


@dataclass(frozen=True)
class FineWebFilter:
    """Drops pages where few lines end in punctuation, most lines are short, many characters
    sit in duplicated lines, or there are many line breaks per word (lists)."""

    name: ClassVar[str] = "fineweb"
    min_punct_lines_ratio: float = field(
        default=0.12, metadata={"help": "share of lines ending in terminal punctuation"}
    )
    short_line_length: int = field(default=30, metadata={"help": "a line this short is short"})
    max_short_lines_ratio: float = field(default=0.67, metadata={"help": "share of short lines"})
    max_dup_line_chars_ratio: float = field(
        default=0.01, metadata={"help": "chars in duplicated lines / chars"}
    )
    max_newline_word_ratio: float = field(default=0.3, metadata={"help": "line breaks per word"})

    def filter(self, text: str) -> FilterResult:
        lines = [line for line in text.split("\n") if line.strip()]
        if not lines:
            return FilterResult.drop("empty")
        ends = terminal_punctuation()
        if sum(line.endswith(ends) for line in lines) / len(lines) < self.min_punct_lines_ratio:
            return FilterResult.drop("line_punct_ratio")
        short = sum(len(line) <= self.short_line_length for line in lines)
        if short / len(lines) > self.max_short_lines_ratio:
            return FilterResult.drop("short_line_ratio")
        chars = len(text) - text.count("\n")
        if duplicates(lines)[1] / max(chars, 1) > self.max_dup_line_chars_ratio:
            return FilterResult.drop("char_dup_ratio")
        words = split_words(text)
        if text.count("\n") / max(len(words), 1) > self.max_newline_word_ratio:
            return FilterResult.drop("list_ratio")
        return FilterResult.kept()
