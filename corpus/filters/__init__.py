"""Document filters. Like datatrove's: a filter looks at a document and keeps it, or drops it
with a reason. Reasons are short snake_case strings; the pipeline counts each one.
"""

from corpus.filters.base import DocumentFilter, FilterResult, apply_filters
from corpus.filters.length import LengthFilter
from corpus.filters.registry import FILTERS, build_filters

__all__ = [
    "FILTERS",
    "DocumentFilter",
    "FilterResult",
    "LengthFilter",
    "apply_filters",
    "build_filters",
]
