"""Exact deduplication: what counts as "the same text", and which copy is kept."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

_WS = re.compile(r"\s+")


def exact_key(text: str) -> str:
    """Hash of the text with case folded and whitespace collapsed (hex sha1, 40 chars).

    Copies that differ only in case or spacing count as the same document.
    """
    canonical = _WS.sub(" ", text.casefold()).strip()
    return hashlib.sha1(canonical.encode("utf-8")).hexdigest()


def choose_kept(ids: Iterable[str]) -> str:
    """The copy kept from a group of identical documents: the smallest id, so reruns agree."""
    return min(ids)
