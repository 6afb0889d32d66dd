"""Length filter: drops documents shorter or longer than a number of characters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from clozeworks.corpus.text.filters.base import FilterResult


@dataclass(frozen=True)
class LengthFilter:
    """Keep documents with min_chars <= len(text) <= max_chars.

    The upper bound protects the later stages (a 200 MB "document" is almost always a dump
    of something else) and is deliberately generous.
    """

    name: ClassVar[str] = "length"
    min_chars: int = field(
        default=1, metadata={"help": "shortest document kept", "flag": "min-chars"}
    )
    max_chars: int = field(
        default=10_000_000, metadata={"help": "longest document kept", "flag": "max-chars"}
    )

    def filter(self, text: str) -> FilterResult:
        if len(text) < self.min_chars:
            return FilterResult.drop("too_short")
        if len(text) > self.max_chars:
            return FilterResult.drop("too_long")
        return FilterResult.kept()
