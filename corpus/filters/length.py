"""Length filter: drops documents shorter or longer than a number of characters."""

from __future__ import annotations

from dataclasses import dataclass

from corpus.filters.base import FilterResult


@dataclass(frozen=True)
class LengthFilter:
    """Keep documents with min_chars <= len(text) <= max_chars.

    The upper bound protects the later stages (a 200 MB "document" is almost always a dump
    of something else) and is deliberately generous.
    """

    min_chars: int = 1
    max_chars: int = 10_000_000
    name: str = "length"

    def filter(self, text: str) -> FilterResult:
        if len(text) < self.min_chars:
            return FilterResult.drop("too_short")
        if len(text) > self.max_chars:
            return FilterResult.drop("too_long")
        return FilterResult.kept()
