"""Filters by name, as `cloze clean --filters` selects them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from corpus.filters.base import DocumentFilter
from corpus.filters.length import LengthFilter

FILTERS: dict[str, Callable[..., DocumentFilter]] = {
    "length": LengthFilter,
}


def build_filters(
    names: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None = None
) -> list[DocumentFilter]:
    """Instantiate filters by name with per-filter keyword options; ValueError on unknown names."""
    options = options or {}
    unknown = [n for n in names if n not in FILTERS]
    if unknown:
        raise ValueError(
            f"unknown filter {', '.join(unknown)}; available: {', '.join(sorted(FILTERS))}"
        )
    return [FILTERS[n](**options.get(n, {})) for n in names]
