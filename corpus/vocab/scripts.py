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
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

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


# Code points below this are looked up in a table; above it lie only CJK extensions
# (Han, by name) and private use, which `script_of_char` answers one by one.
_TABLE_SIZE = 0x20000


@lru_cache(maxsize=1)
def _script_table() -> tuple[np.ndarray, tuple[str, ...]]:
    """(index of each code point's script, 0 for no letter; the scripts' names)."""
    names: dict[str, int] = {"": 0}
    table = np.zeros(_TABLE_SIZE, dtype=np.uint16)
    name_of = script_of_char.__wrapped__
    for cp in range(_TABLE_SIZE):
        script = name_of(chr(cp))
        if script is not None:
            table[cp] = names.setdefault(script, len(names))
    return table, tuple(names)


def main_script(text: str) -> str | None:
    """The script most of `text`'s letters are in (ties: the first in the table's order);
    None without letters."""
    return main_scripts([text])[0]


# Texts counted at once: their letters by script fit in a few MB (texts x scripts).
_TEXTS_AT_ONCE = 4096


def main_scripts(texts: Sequence[str]) -> list[str | None]:
    """`main_script` of each text, a few thousand at a time in one pass over their code
    points (a vocabulary's 30,000 pieces in a few tens of milliseconds)."""
    return [
        script
        for start in range(0, len(texts), _TEXTS_AT_ONCE)
        for script in _main_scripts(texts[start : start + _TEXTS_AT_ONCE])
    ]


def _main_scripts(texts: Sequence[str]) -> list[str | None]:
    table, names = _script_table()
    if not texts:
        return []
    points = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    owner = np.repeat(np.arange(len(texts)), [len(t) for t in texts])
    low = points < _TABLE_SIZE
    index = np.zeros(len(points), dtype=np.int64)
    index[low] = table[points[low]]
    for cp in np.unique(points[~low]).tolist():
        script = script_of_char(chr(cp))
        if script in names:
            index[points == cp] = names.index(script)
    letters = index > 0
    flat = owner[letters] * len(names) + index[letters]
    counts = np.bincount(flat, minlength=len(texts) * len(names)).reshape(len(texts), len(names))
    best = counts.argmax(axis=1).tolist()
    found = (counts.max(axis=1) > 0).tolist()
    return [names[b] if f else None for b, f in zip(best, found, strict=True)]
