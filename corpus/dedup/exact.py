"""Exact and line-level deduplication: what counts as "the same", and which copy is kept."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable

from clozeworks.corpus.text.sentences import split_sentences

# ASCII whitespace but space and line feed (str.isspace() of the ASCII characters).
_OTHER_ASCII_SPACE = bytes([0x09, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F])
_LINE_FEED_TO_SPACE = bytes.maketrans(b"\n", b" ")


def exact_key(text: str) -> str:
    """Hash of the text with case folded and whitespace collapsed (hex sha1, 40 chars).

    Copies that differ only in case or spacing count as the same document.
    """
    if text.isascii():
        # What `clean` writes: single spaces, lines stripped, at most one blank line in a
        # row. There the collapse is two C passes, where splitting into words took most of
        # the time; any other ASCII text takes the general way below.
        raw = text.encode("ascii")
        if len(raw.translate(None, _OTHER_ASCII_SPACE)) == len(raw):
            flat = raw.replace(b"\n\n", b"\n").translate(_LINE_FEED_TO_SPACE)
            if b"  " not in flat and flat[:1] != b" " and flat[-1:] != b" ":
                return hashlib.sha1(flat.lower()).hexdigest()
    # str.split() splits at the characters `\s` matches (str.isspace()), 4x faster than
    # re.sub for the same string.
    canonical = " ".join(text.casefold().split())
    return hashlib.sha1(canonical.encode("utf-8")).hexdigest()


def choose_kept(ids: Iterable[str]) -> str:
    """The copy kept from a group of identical documents: the smallest id, so reruns agree."""
    return min(ids)


def line_key(line: str) -> str:
    """Hash of a stripped, lowercased line (C4's `_hash_text` of `line.strip().lower()`)."""
    return hashlib.md5(line.strip().lower().encode("utf-8")).hexdigest()


def line_keys(text: str) -> set[str]:
    """The distinct non-empty line keys of a document."""
    return {line_key(line) for line in text.split("\n") if line.strip()}


def owner_rank(doc_id: str) -> str:
    """Which document keeps a line that several share: the one with the smallest rank. A hash
    of the id rather than the id itself, so no source wins every line (as in C4)."""
    return hashlib.md5(doc_id.encode("utf-8")).hexdigest() + doc_id


def keep_owned_lines(text: str, owned: Collection[str]) -> tuple[str, int]:
    """`text` with only the lines whose key is in `owned`, each at most once, and the number
    of non-empty lines removed. Empty lines (paragraph breaks) stay."""
    kept: list[str] = []
    seen: set[str] = set()
    removed = 0
    for line in text.split("\n"):
        if not line.strip():
            kept.append(line)
            continue
        key = line_key(line)
        if key in owned and key not in seen:
            kept.append(line)
            seen.add(key)
        else:
            removed += 1
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip(), removed


def too_few_sentences(text: str, minimum: int) -> bool:
    return minimum > 0 and len(split_sentences(text)) < minimum
