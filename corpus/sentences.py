"""Sentence segmentation for building sentence-aligned training sequences.

A rule-based splitter: a sentence ends at `.`, `!` or `?` (optionally followed by closing
quotes or brackets) before whitespace and an uppercase letter, digit or opening quote,
unless the word before the full stop is a known abbreviation, an initial, or a number.
Line breaks that separate paragraphs always end a sentence.
"""

from __future__ import annotations

import re

ABBREVIATIONS = frozenset(
    """
    mr mrs ms dr prof sr jr st vs etc e.g i.e cf al fig figs eq eqs no nos vol vols pp ed
    eds inc ltd co corp dept univ approx jan feb mar apr jun jul aug sep sept oct nov dec
    mon tue wed thu fri sat sun gen col lt sgt capt rev hon est ca resp
    """.split()  # noqa: SIM905 - a word list reads better as prose
)

_BOUNDARY = re.compile(r"""([.!?]+["'”’)\]]*)(\s+)(?=["'“‘(\[]?[A-Z0-9])""")
_PARAGRAPH = re.compile(r"\n\s*\n")


def split_sentences(text: str) -> list[str]:
    """Sentences of `text` in order, stripped, none empty. Concatenation keeps every word."""
    sentences: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        sentences.extend(_split_paragraph(paragraph))
    return sentences


def _split_paragraph(paragraph: str) -> list[str]:
    out: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(paragraph):
        end = match.end(1)
        if match.group(1).startswith(".") and _is_abbreviation(paragraph, match.start(1)):
            continue
        piece = paragraph[start:end].strip()
        if piece:
            out.append(piece)
        start = match.end()
    tail = paragraph[start:].strip()
    if tail:
        out.append(tail)
    return out


def _is_abbreviation(text: str, dot: int) -> bool:
    word_start = dot
    while word_start > 0 and not text[word_start - 1].isspace():
        word_start -= 1
    word = text[word_start:dot].lstrip("(\"'“‘[").lower()
    if not word:
        return False
    if word in ABBREVIATIONS or word.rstrip(".") in ABBREVIATIONS:
        return True
    if len(word) == 1 and word.isalpha():  # an initial: "J. R. R. Tolkien"
        return True
    return bool(re.fullmatch(r"(?:[a-z]\.)+[a-z]", word))  # "u.s", "e.g"
