"""Filters by name, as `cloze clean --filters` selects them, and the flags that set them."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from clozeworks.corpus.text.filters.base import DocumentFilter
from clozeworks.corpus.text.filters.c4 import C4Filter
from clozeworks.corpus.text.filters.fineweb import FineWebFilter
from clozeworks.corpus.text.filters.gopher import GopherQualityFilter, GopherRepetitionFilter
from clozeworks.corpus.text.filters.language import LanguageFilter
from clozeworks.corpus.text.filters.length import LengthFilter

FILTERS: dict[str, Callable[..., DocumentFilter]] = {
    "length": LengthFilter,
    "c4": C4Filter,
    "gopher-quality": GopherQualityFilter,
    "gopher-repetition": GopherRepetitionFilter,
    "fineweb": FineWebFilter,
    "language": LanguageFilter,
}
# Shorthands accepted by --filters.
ALIASES = {"gopher": ("gopher-quality", "gopher-repetition")}


@dataclasses.dataclass(frozen=True)
class FilterParam:
    """One threshold of one filter: its command-line flag, type, default and help."""

    filter: str
    field: str
    flag: str
    type: type
    default: Any
    help: str


def filter_params(name: str) -> list[FilterParam]:
    """The settable fields of filter `name`, flags named `--{filter}-{field}` unless the
    field says otherwise."""
    cls = FILTERS[name]
    params = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        flag = f.metadata.get("flag") or f"{name}-{f.name.replace('_', '-')}"
        kind = type(f.default)
        params.append(FilterParam(name, f.name, flag, kind, f.default, f.metadata.get("help", "")))
    return params


def expand_names(names: Sequence[str]) -> list[str]:
    """Filter names with shorthands expanded, in order, without repeats; ValueError on unknown."""
    out: list[str] = []
    for name in names:
        for real in ALIASES.get(name, (name,)):
            if real not in FILTERS:
                known = ", ".join(sorted([*FILTERS, *ALIASES]))
                raise ValueError(f"unknown filter {real!r}; available: {known}")
            if real not in out:
                out.append(real)
    return out


def build_filters(
    names: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None = None
) -> list[DocumentFilter]:
    """Instantiate filters by name with per-filter keyword options; ValueError on unknown names."""
    options = options or {}
    filters = []
    for name in expand_names(names):
        filters.append(FILTERS[name](**options.get(name, {})))
        check_values(name, filters[-1])
    return filters


def check_values(name: str, f: DocumentFilter) -> None:
    """ValueError naming the flag of a threshold that cannot mean anything: every number is
    finite and >= 0, a ratio, fraction or score is at most 1, and `min_X` <= `max_X`."""
    flags = {p.field: p.flag for p in filter_params(name)}
    for field, flag in flags.items():
        value = getattr(f, field)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"--{flag} must be a number >= 0, got {value}")
        if field.endswith(("_ratio", "_frac", "_score")) and value > 1:
            raise ValueError(f"--{flag} is a fraction and must be at most 1, got {value}")
        low = field.replace("max_", "min_", 1)
        if field.startswith("max_") and low in flags and getattr(f, low) > value:
            raise ValueError(f"--{flags[low]} {getattr(f, low)} is above --{flag} {value}")
