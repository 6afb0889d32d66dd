"""Word and line statistics the quality filters share."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import cache

# A word is a run of letters/digits/underscore, an ellipsis, or one other non-space character
# (each punctuation mark is a token, as in the spaCy English tokenizer datatrove uses).
_WORD = re.compile(r"\w+|\.\.\.|[^\w\s]")
_ALNUM = re.compile(r"\w")
_CONTENT = re.compile(r"\w+")
_SYMBOL = re.compile(r"\.\.\.|[^\w\s]")
_NUMERIC = re.compile(r"(?<!\w)[\d_]+(?!\w)")  # a word without a letter
_PARAGRAPHS = re.compile(r"\n{2,}")
_LINES = re.compile(r"\n+")


def split_words(text: str) -> list[str]:
    return _WORD.findall(text)


def content_words(text: str) -> list[str]:
    """The words of `split_words` that are not punctuation or symbols."""
    return _CONTENT.findall(text)


def count_symbols(text: str) -> int:
    """How many tokens of `split_words` are punctuation or symbols."""
    return len(_SYMBOL.findall(text))


def count_numeric_words(text: str) -> int:
    """How many content words have no letter (digits and underscores only)."""
    return len(_NUMERIC.findall(text))


def token_counts(tokens: Sequence[str]) -> tuple[list[str], int, int]:
    """(content words, symbol tokens, numeric words) of a segmenter's tokens, counted as
    `content_words`, `count_symbols` and `count_numeric_words` count a spaced text's."""
    content = [t for t in tokens if not is_symbol(t)]
    numeric = sum(1 for t in content if _NUMERIC.fullmatch(t))
    return content, len(tokens) - len(content), numeric


def is_symbol(word: str) -> bool:
    """A token with no letter, digit or underscore (punctuation, symbols)."""
    return _ALNUM.search(word) is None


def paragraphs(text: str) -> list[str]:
    return _PARAGRAPHS.split(text.strip())


def nonempty_lines(text: str) -> list[str]:
    return _LINES.split(text)


def duplicates(items: Sequence[str]) -> tuple[int, int]:
    """(number of items seen before, their characters) — Gopher's duplicate line counting."""
    seen: set[str] = set()
    count = chars = 0
    for item in items:
        if item in seen:
            count += 1
            chars += len(item)
        else:
            seen.add(item)
    return count, chars


@cache
def terminal_punctuation() -> tuple[str, ...]:
    """Characters that end a sentence in any script: Unicode punctuation named FULL STOP,
    QUESTION MARK or EXCLAMATION MARK (the Sentence_Terminal set, near enough), plus the
    ellipsis. Built once from `unicodedata`."""
    marks = {"\u2026"}
    for code in range(0x21, 0x20000):
        ch = chr(code)
        if unicodedata.category(ch) != "Po":
            continue
        name = unicodedata.name(ch, "")
        if "FULL STOP" in name or "QUESTION MARK" in name or "EXCLAMATION MARK" in name:
            marks.add(ch)
    return tuple(sorted(marks))
