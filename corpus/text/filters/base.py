"""The filter protocol."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class FilterResult:
    """`keep` or not; `reason` says why a document was dropped (None when kept).

    A filter may also return modified text (C4's line rules remove lines, not documents).
    """

    keep: bool
    reason: str | None = None
    text: str | None = None

    @staticmethod
    def kept(text: str | None = None) -> FilterResult:
        return FilterResult(True, None, text)

    @staticmethod
    def drop(reason: str) -> FilterResult:
        return FilterResult(False, reason, None)


class DocumentFilter(Protocol):
    @property
    def name(self) -> str: ...

    def filter(self, text: str) -> FilterResult: ...


def apply_filters(text: str, filters: Sequence[DocumentFilter]) -> FilterResult:
    """Run filters in order; the first drop wins. Returns the final text when kept."""
    for f in filters:
        result = f.filter(text)
        if not result.keep:
            return FilterResult.drop(f"{f.name}.{result.reason}")
        if result.text is not None:
            text = result.text
    return FilterResult.kept(text)
