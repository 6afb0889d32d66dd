"""Document filters. Like datatrove's: a filter looks at a document and keeps it, or drops it
with a reason. Reasons are short snake_case strings; the pipeline counts each one as
`dropped.{filter}.{reason}`. Thresholds and where they come from: docs/filters.md.
"""

from clozeworks.corpus.text.filters.base import DocumentFilter, FilterResult, apply_filters
from clozeworks.corpus.text.filters.c4 import C4Filter
from clozeworks.corpus.text.filters.fineweb import FineWebFilter
from clozeworks.corpus.text.filters.gopher import GopherQualityFilter, GopherRepetitionFilter
from clozeworks.corpus.text.filters.language import LanguageFilter
from clozeworks.corpus.text.filters.length import LengthFilter
from clozeworks.corpus.text.filters.registry import (
    FILTERS,
    FilterParam,
    build_filters,
    expand_names,
    filter_params,
)

__all__ = [
    "FILTERS",
    "C4Filter",
    "DocumentFilter",
    "FilterParam",
    "FilterResult",
    "FineWebFilter",
    "GopherQualityFilter",
    "GopherRepetitionFilter",
    "LanguageFilter",
    "LengthFilter",
    "apply_filters",
    "build_filters",
    "expand_names",
    "filter_params",
]
