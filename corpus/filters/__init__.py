"""Document filters. Like datatrove's: a filter looks at a document and keeps it, or drops it
with a reason. Reasons are short snake_case strings; the pipeline counts each one as
`dropped.{filter}.{reason}`. Thresholds and where they come from: docs/filters.md.
"""

from corpus.filters.base import DocumentFilter, FilterResult, apply_filters
from corpus.filters.c4 import C4Filter
from corpus.filters.fineweb import FineWebFilter
from corpus.filters.gopher import GopherQualityFilter, GopherRepetitionFilter
from corpus.filters.language import LanguageFilter
from corpus.filters.length import LengthFilter
from corpus.filters.registry import FILTERS, FilterParam, build_filters, expand_names, filter_params

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
