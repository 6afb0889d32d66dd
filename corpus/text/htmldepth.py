"""How deep an HTML page's elements nest, from its bytes, in a few vectorized passes.

Resiliparse parses any page in linear time, but its main-content extraction is quadratic
in nesting depth: 4,000 nested `<div>` take 0.3 s, 16,000 take 6 s, a crawl's hostile page
of 10^5-10^6 minutes. Blink's HTML parser stops nesting at 512 (`kMaximumHTMLParserDOMTree
Depth`); a page deeper than that is no page a reader sees as written, so it is counted as
`too_complex` instead of extracted.

The depth is counted as a browser would, nearly: each start tag opens an element, each end
tag closes one (never below zero), and elements that never nest (void elements such as
`<br>`, `<img>`, self-closing `<x/>`) or that the parser closes by itself when the next of
their kind starts (`<p>`, `<li>`, `<td>`, `<tr>`, `<option>`, ...) do not count.
"""

from __future__ import annotations

import numpy as np

# Blink's kMaximumHTMLParserDOMTreeDepth.
MAX_DEPTH = 512
# A tag's name as looked up: its first bytes, lowercased, zero-padded.
_NAME_BYTES = 8
_FLAT_NAMES = (
    "area base br col embed hr img input link meta source track wbr param keygen "
    "p li dt dd td th tr option optgroup rb rt rp rtc colgroup caption thead tbody tfoot"
)
_FLAT = _FLAT_NAMES.split()


def _packed(names: list[bytes]) -> np.ndarray:
    padded = np.zeros((len(names), _NAME_BYTES), dtype=np.uint8)
    for i, name in enumerate(names):
        padded[i, : len(name)] = np.frombuffer(name[:_NAME_BYTES], dtype=np.uint8)
    return padded.view(np.uint64).ravel()


_FLAT_PACKED = _packed([n.encode() for n in _FLAT])


def html_depth(body: bytes) -> int:
    """The deepest element nesting of the page `body` (see the module's rules)."""
    data = np.frombuffer(body, dtype=np.uint8)
    opens = np.flatnonzero(data == ord("<"))
    if len(opens) == 0:
        return 0
    padded = np.concatenate([data, np.zeros(_NAME_BYTES + 2, dtype=np.uint8)])
    first = padded[opens + 1]
    closing = first == ord("/")
    start = opens + 1 + closing
    window = padded[start[:, None] + np.arange(_NAME_BYTES)]
    letter = ((window | 0x20) >= ord("a")) & ((window | 0x20) <= ord("z"))
    is_name = letter | ((window >= ord("0")) & (window <= ord("9")))
    is_name &= np.cumprod(is_name, axis=1).astype(bool)  # the name's bytes only
    tag = letter[:, 0]  # `<` then a letter (or `</` then a letter): a tag
    names = np.where(is_name, window | 0x20, 0).astype(np.uint8)
    flat = np.isin(np.ascontiguousarray(names).view(np.uint64).ravel(), _FLAT_PACKED)
    # A start tag ending in `/>` opens nothing.
    ends = np.flatnonzero(data == ord(">"))
    at = np.searchsorted(ends, opens)
    closes_self = np.zeros(len(opens), dtype=bool)
    found = at < len(ends)
    closes_self[found] = padded[np.maximum(ends[at[found]] - 1, 0)] == ord("/")
    step = np.where(tag & ~flat & ~closing & ~closes_self, 1, 0)
    step = step - np.where(tag & ~flat & closing, 1, 0)
    total = np.cumsum(step)
    # Depth never goes below zero: a stray end tag does not cancel a later start tag.
    floor = np.minimum(np.minimum.accumulate(total), 0)
    return int((total - floor).max(initial=0))


def too_deep(body: bytes) -> bool:
    """Whether the page nests deeper than MAX_DEPTH (a page of fewer tags cannot)."""
    return body.count(b"<") > MAX_DEPTH and html_depth(body) > MAX_DEPTH
