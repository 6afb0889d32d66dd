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

from dataclasses import dataclass

# Gopher's stop words (Rae et al. 2021, A.1.1), as datatrove has them.
ENGLISH_STOP_WORDS = frozenset(["the", "be", "to", "of", "and", "that", "have", "with"])
# What ends a sentence in C4's line rule, and the full-width marks of Chinese and Japanese.
LATIN_TERMINAL = (".", "!", "?", '"')
WIDE_TERMINAL = ("。", "！", "？", "」", "』")


@dataclass(frozen=True)
class LanguageSettings:
    """The assumptions one language's text allows; None leaves that rule out."""

    name: str
    # Gopher: distinct stop words a document must have (with its min_stop_words).
    stop_words: frozenset[str] | None
    # Gopher: the mean word length bounds apply (calibrated on English).
    word_length_rule: bool
    # Words are separated by spaces: word counts (Gopher's 50-word minimum, C4's five
    # words a line, word n-grams) mean something.
    spaced_words: bool
    # C4: a kept line ends in one of these.
    terminal_punctuation: tuple[str, ...]


ENGLISH = LanguageSettings("en", ENGLISH_STOP_WORDS, True, True, LATIN_TERMINAL)
FALLBACK = LanguageSettings("fallback", None, False, True, LATIN_TERMINAL + WIDE_TERMINAL)
# Written without spaces: word rules wait for a word segmenter (issue 36, item 4).
UNSPACED = LanguageSettings("unspaced", None, False, False, LATIN_TERMINAL + WIDE_TERMINAL)

SETTINGS: dict[str, LanguageSettings] = {
    "en": ENGLISH,
    "zh": UNSPACED,
    "ja": UNSPACED,
    "th": UNSPACED,
    "lo": UNSPACED,
    "km": UNSPACED,
    "my": UNSPACED,
}


def settings_for(language: str | None) -> LanguageSettings:
    """The settings of an ISO 639-1 code (a region suffix ignored: `en-US`, `zh_CN`); no
    language at all is English, as every filter assumed before languages were known."""
    if not language:
        return ENGLISH
    code = language.replace("_", "-").split("-", 1)[0].lower()
    return SETTINGS.get(code, FALLBACK)
