"""What the word-based filters may assume of a document's language.

Gopher's and C4's rules were written for English: Gopher wants two of eight English stop
words and a mean word length of 3 to 10 characters, C4 lines that end in `. ! ? "` and have
five words. Applied to Korean they drop most pages for having no English stop words; to
Chinese or Japanese, written without spaces, every "word" is a whole run of text. A
document's language (`cloze clean --language`, or what `--filters language` identified)
picks its settings here; a language without settings gets `FALLBACK`, which leaves out
every rule that only English justifies, so no document is dropped for not being English.
`.stats.json` says, per language, how many documents were filtered and with which settings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from clozeworks.corpus.text.filters.segmenters import available, segmenter

# Gopher's stop words (Rae et al. 2021, A.1.1), as datatrove has them.
ENGLISH_STOP_WORDS = frozenset(["the", "be", "to", "of", "and", "that", "have", "with"])
# What ends a sentence in C4's line rule, and the full-width marks of Chinese and Japanese.
LATIN_TERMINAL = (".", "!", "?", '"')
# ISO 639-2's code for a language not determined: no --language and no language filter.
UNDETERMINED = "und"
# An ISO 639 code, optionally with a region or script: ko, en-US, zh_CN, zh-Hant-TW.
_CODE = re.compile(r"[a-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*")
WIDE_TERMINAL = ("。", "！", "？", "」", "』")


@dataclass(frozen=True)
class LanguageSettings:
    """The assumptions one language's text allows; None leaves that rule out."""

    name: str
    # Gopher: distinct stop words a document must have (with its min_stop_words).
    stop_words: frozenset[str] | None
    # Gopher: the mean word length bounds apply (calibrated on English).
    word_length_rule: bool
    # Words can be counted (spaces between them, or a segmenter): Gopher's 50-word minimum,
    # its symbol, alphabetic-word and n-gram rules, C4's five words a line.
    word_rules: bool
    # C4: a kept line ends in one of these.
    terminal_punctuation: tuple[str, ...]
    # corpus/text/filters/segmenters.py: where words are not separated by spaces.
    segmenter: str | None = None


ENGLISH = LanguageSettings("en", ENGLISH_STOP_WORDS, True, True, LATIN_TERMINAL)
FALLBACK = LanguageSettings("fallback", None, False, True, LATIN_TERMINAL + WIDE_TERMINAL)
# Written without spaces, and no segmenter: only line and paragraph rules.
UNSPACED = LanguageSettings("unspaced", None, False, False, LATIN_TERMINAL + WIDE_TERMINAL)
# Chinese and Japanese words are one to three characters: no English word-length bounds.
CHINESE = LanguageSettings("zh", None, False, True, LATIN_TERMINAL + WIDE_TERMINAL, "jieba")
JAPANESE = LanguageSettings("ja", None, False, True, LATIN_TERMINAL + WIDE_TERMINAL, "fugashi")

SETTINGS: dict[str, LanguageSettings] = {
    "en": ENGLISH,
    "zh": CHINESE,
    "ja": JAPANESE,
    "th": UNSPACED,
    "lo": UNSPACED,
    "km": UNSPACED,
    "my": UNSPACED,
}


def _registered(language: str | None) -> LanguageSettings:
    """The registry's settings of an ISO 639-1 code (a region suffix ignored: `en-US`,
    `zh_CN`); no language at all is English."""
    if not language:
        return ENGLISH
    return SETTINGS.get(language.replace("_", "-").split("-", 1)[0].lower(), FALLBACK)


def segmenter_name(language: str | None) -> str | None:
    """The segmenter that finds the words of `language` (None: words are separated by
    spaces), whether or not it is installed."""
    return _registered(language).segmenter


def settings_for(language: str | None) -> LanguageSettings:
    """The settings of an ISO 639-1 code (see `_registered`); no language at all is
    English, as every filter assumed before languages were known. A language whose
    segmenter is not installed counts no words."""
    settings = _registered(language)
    if settings.segmenter is not None and not available(settings.segmenter):
        return UNSPACED
    return settings


def words_of(text: str, settings: LanguageSettings) -> list[str] | None:
    """The words (and punctuation tokens) of `text` by the language's segmenter; None
    where words are separated by spaces (the filters split them themselves)."""
    if settings.segmenter is None:
        return None
    return segmenter(settings.segmenter)(text)


def is_language_code(text: str) -> bool:
    return _CODE.fullmatch(text) is not None


def settings_report(documents: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """`.stats.json`'s `languages`: per code (UNDETERMINED: English's settings), the
    documents filtered and the name of the settings they got."""
    return {
        code: {
            "documents": n,
            "settings": settings_for(None if code == UNDETERMINED else code).name,
        }
        for code, n in sorted(documents.items())
    }
