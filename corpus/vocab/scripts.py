"""The writing system of a word, for figures per script (vocab_stats.json's `by_script`).

Python's `unicodedata` has no Script property, but every letter's Unicode name starts with
its script's name ("LATIN SMALL LETTER A", "HANGUL SYLLABLE GA", "CJK UNIFIED IDEOGRAPH-
4E00", "HIRAGANA LETTER KA", "DEVANAGARI LETTER KA"), which is all a statistic needs: a
word is counted under the script most of its letters have, and a word without letters
(numbers, punctuation) under none.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from functools import lru_cache

# Name prefixes that are not the script's own name.
_ALIASES = {
    "CJK": "Han",
    "HIRAGANA": "Kana",
    "KATAKANA": "Kana",
    "HALFWIDTH": "",  # HALFWIDTH KATAKANA ..., FULLWIDTH LATIN ...: the next word is the script
    "FULLWIDTH": "",
    "MODIFIER": "Latin",  # modifier letters are mostly phonetic Latin
}


@lru_cache(maxsize=1 << 16)
def script_of_char(ch: str) -> str | None:
    """The script of a letter (None for anything else)."""
    if not ch.isalpha():
        return None
    words = unicodedata.name(ch, "").split()
    while words and _ALIASES.get(words[0]) == "":
        words = words[1:]
    if not words:
        return "Other"
    return _ALIASES.get(words[0]) or words[0].title()


@lru_cache(maxsize=1 << 18)
def script_of(word: str) -> str | None:
    """The script most of the word's letters are in (ties: the first met); None without
    letters."""
    counts = Counter(s for s in map(script_of_char, word) if s is not None)
    return counts.most_common(1)[0][0] if counts else None
