"""The filter protocol."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from clozeworks.corpus.text.filters.languages import LanguageSettings, settings_for


@dataclass(frozen=True)
class FilterResult:
    """`keep` or not; `reason` says why a document was dropped (None when kept).

    A filter may also return modified text (C4's line rules remove lines, not documents),
    and the language filter the document's language, which the filters after it use.
    """

    keep: bool
    reason: str | None = None
    text: str | None = None
    language: str | None = None

    @staticmethod
    def kept(text: str | None = None, language: str | None = None) -> FilterResult:
        return FilterResult(True, None, text, language)

    @staticmethod
    def drop(reason: str) -> FilterResult:
        return FilterResult(False, reason, None)


class DocumentFilter(Protocol):
    """A filter; one whose rules depend on the language also has
    `filter_in(text, settings: LanguageSettings) -> FilterResult`, and its `filter(text)`
    is `filter_in` with English's."""

    @property
    def name(self) -> str: ...

    def filter(self, text: str) -> FilterResult: ...


def apply_filters(
    text: str, filters: Sequence[DocumentFilter], language: str | None = None
) -> FilterResult:
    """Run filters in order; the first drop wins. Returns the final text when kept, and the
    document's language either way (`language`, or what a language filter identified)."""
    settings: LanguageSettings = settings_for(language)
    for f in filters:
        in_language = getattr(f, "filter_in", None)
        result = in_language(text, settings) if in_language is not None else f.filter(text)
        if result.language is not None:
            language, settings = result.language, settings_for(result.language)
        if not result.keep:
            return replace(FilterResult.drop(f"{f.name}.{result.reason}"), language=language)
        if result.text is not None:
            text = result.text
    return FilterResult.kept(text, language)
