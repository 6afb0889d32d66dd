"""Word and line statistics the quality filters share."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache

# Words as spaCy's English tokenizer cuts them (datatrove's word tokenizer; spaCy's
# spacy/lang/punctuation.py and char_classes.py, MIT): a space-separated chunk loses
# punctuation, quotes and brackets from its start (prefixes) and end (suffixes, with `'s`,
# `n't`, and a period after a lowercase letter or a digit), then splits where an infix
# rule says (a hyphen or `/`, `:`, `=` between letters, an operator between digits). A URL
# and the common abbreviations stay whole. So `sources.list`, `12.1`, `-us`, `GPL-2` are
# one word each, as datatrove counts them, and a translation's commands and file names
# count as its original's. Near enough: on 1,093 English documents (bench/clean/words.py)
# the share of words with a letter differs from spaCy's by 0.0016 on average and falls on
# the same side of Gopher's 0.8 in 99.4% of them, at fifteen times spaCy's speed.
_PUNCT = r"…,:;!?¿¡()\[\]{}<>_#*&。？！，、；：～·"
_QUOTES = r"'\"”“`‘´’‚„»«「」『』（）〔〕【】《》〈〉⟦⟧"
_CURRENCY = r"$£€¥฿₽₴₩₪₫₭₮₱₲₵₸₹₺₼₾₿"
# spaCy's letter classes: a script without case (Hangul, kana, Han, Arabic, ...) counts as
# both lower and upper. A letter is a word character that is not a digit or `_`.
_CASED_LOWER = r"a-zß-öø-ÿа-яёα-ω"
_CASED_UPPER = r"A-ZÀ-ÖØ-ÞА-ЯЁΑ-Ω"
_LOWER = rf"[^\W\d_{_CASED_UPPER}]"  # a lowercase or uncased letter
_UPPER = rf"[^\W\d_{_CASED_LOWER}]"  # an uppercase or uncased letter
_ALPHA = r"[^\W\d_]"
_HYPHEN = r"(?:---|--|——|[-–—~])"
_UNITS = (
    r"km|m|cm|mm|nm|µm|ha|yd|in|ft|kg|g|mg|µg|t|lb|oz|mph|hPa|Pa|mbar|mb|MB|kb|KB|gb|GB|tb|TB"
    r"|T|G|M|K|%"
)
_PREFIX = re.compile(rf"\.\.+|[§%=—–{_PUNCT}{_QUOTES}{_CURRENCY}]|\+(?![0-9])")
_SUFFIX = re.compile(
    rf"(?:\.\.+|[{_PUNCT}{_QUOTES}—–]|['’](?:[sS]|re|ll|ve|d|m)|n['’]t|(?<=[0-9])\+"
    rf"|(?<=[0-9])[{_CURRENCY}]|(?<=[0-9])(?:{_UNITS})"
    rf"|(?:(?<=[0-9%²\-+{_PUNCT}{_QUOTES}])|(?<={_LOWER}))\.|(?<={_UPPER}{_UPPER})\.)$"
)
_INFIX = re.compile(
    rf"\.\.+|…|(?<=[0-9])[+\-*^](?=[0-9-])"
    rf"|(?:(?<={_LOWER})|(?<=[{_QUOTES}]))\.(?={_UPPER}|[{_QUOTES}])"
    rf"|(?<={_ALPHA}),(?={_ALPHA})|(?<={_ALPHA}){_HYPHEN}(?={_ALPHA})"
    rf"|(?<=[^\W_])[:<>=/](?={_ALPHA})"
)
# A scheme of at most 32 characters: a chunk that is not a URL fails within them, not
# after scanning a long run of letters at every step of its peeling.
_URL = re.compile(r"(?:[a-zA-Z][a-zA-Z0-9+.-]{0,31}://|www\.)\S+")
# spaCy's English exceptions that stay one word (its emoticons left out).
_ABBREVIATIONS = frozenset({
    "Adm.", "Ak.", "Ala.", "Apr.", "Ariz.", "Ark.", "Aug.", "Bros.", "Calif.", "Co.", "Colo.",
    "Conn.", "Corp.", "D.C.", "Dec.", "Del.", "Dr.", "E.G.", "E.g.", "Feb.", "Fla.", "Ga.",
    "Gen.", "Gov.", "I.E.", "I.e.", "Ia.", "Id.", "Ill.", "Inc.", "Ind.", "Jan.", "Jr.", "Jul.",
    "Jun.", "Kan.", "Kans.", "Ky.", "La.", "Ltd.", "Mar.", "Mass.", "Md.", "Messrs.", "Mich.",
    "Minn.", "Miss.", "Mo.", "Mont.", "Mr.", "Mrs.", "Ms.", "Mt.", "N.C.", "N.D.", "N.H.",
    "N.J.", "N.M.", "N.Y.", "Neb.", "Nebr.", "Nev.", "Nov.", "Oct.", "Okla.", "Ore.", "Pa.",
    "Ph.D.", "Prof.", "Rep.", "Rev.", "S.C.", "Sen.", "Sep.", "Sept.", "St.", "Tenn.", "Va.",
    "Wash.", "Wis.", "a.m.", "co.", "e.g.", "i.e.", "p.m.", "v.s.", "vs.", "and/or",
    *(f"{letter}." for letter in "abcdefghijklmnopqrstuvwxyzäöü"),
})  # fmt: skip
_ABBREVIATION_STEMS = frozenset(a[:-1] for a in _ABBREVIATIONS)
_LONGEST_ABBREVIATION = max(map(len, _ABBREVIATIONS))
# Every suffix but a run of dots is at most 4 characters (`mbar`, `n't`): seek it there.
_SUFFIX_WINDOW = 8
# Chunks this long or shorter are remembered (`(C)`, `and/or`, `GPL-2+`, `/usr/bin/`).
_CACHED_CHUNK = 64
# "12kg", "100MB": a unit after digits is a suffix; other runs of letters and digits are
# one word, and need no regex.
_UNIT_AFTER_DIGITS = re.compile(rf"[0-9]+(?:{_UNITS})").fullmatch
# A chunk's last character that is always a suffix (the common case, taken without regex).
_ALWAYS_SUFFIX = frozenset(",;:!?)]}\"'”’")
_ALNUM = re.compile(r"\w")
_LETTER = re.compile(r"[^\W\d_]")
_PARAGRAPHS = re.compile(r"\n{2,}")
_LINES = re.compile(r"\n+")


def split_words(text: str) -> list[str]:
    return list(_split_words(text))


@lru_cache(maxsize=1)  # Gopher's quality and repetition filters split the same text, in turn
def _split_words(text: str) -> tuple[str, ...]:
    words: list[str] = []
    for chunk in text.split():
        if len(chunk) == 1 or _one_word(chunk):
            words.append(chunk)
            continue
        head, last = chunk[:-1], chunk[-1]
        if _one_word(head) and (
            last in _ALWAYS_SUFFIX
            or (
                last == "."
                and not head[-1].isupper()  # a digit, a lowercase or an uncased letter
                and head not in _ABBREVIATION_STEMS
            )
        ):
            words += (head, last)
        else:
            words += _split_chunk(chunk)
    return tuple(words)


def _one_word(chunk: str) -> bool:
    """Letters and digits only, and not a number with its unit: no rule splits it."""
    return chunk.isalnum() and not (chunk[0].isdigit() and _UNIT_AFTER_DIGITS(chunk))


def _whole(chunk: str, start: int, end: int) -> bool:
    """Whether chunk[start:end] stays one word: an abbreviation of spaCy's, or a URL."""
    if end - start <= _LONGEST_ABBREVIATION and chunk[start:end] in _ABBREVIATIONS:
        return True
    return _URL.fullmatch(chunk, start, end) is not None


def _split_chunk(chunk: str) -> tuple[str, ...]:
    # Most chunks are short and repeat; a long one (a rule of 20,000 `=`) is not kept.
    return _split_short(chunk) if len(chunk) <= _CACHED_CHUNK else _split_affixes(chunk)


def _split_affixes(chunk: str) -> tuple[str, ...]:
    """A chunk's prefixes, its infix-split middle and its suffixes, as spaCy's tokenizer
    peels them (`Tokenizer._split_affixes`). Positions, not slices, and a suffix sought
    only near the end, so that a chunk of n marks costs n steps, not n squared."""
    words: list[str] = []
    suffixes: list[str] = []
    start, end = 0, len(chunk)
    while start < end and not _whole(chunk, start, end):
        prefix = _PREFIX.match(chunk, start, end)
        if prefix:
            words.append(prefix.group())
            start = prefix.end()
            if start == end or _whole(chunk, start, end):
                break
        if end - start > _SUFFIX_WINDOW:  # lookbehinds see only the chunk's own rest
            suffix = _SUFFIX.search(chunk, end - _SUFFIX_WINDOW, end)
            offset = 0
        else:
            suffix = _SUFFIX.search(chunk[start:end])
            offset = start
        if suffix:
            cut = offset + suffix.start()
            if suffix.group().startswith(".."):  # a run of dots is one suffix, however long
                while cut > start and chunk[cut - 1] == ".":
                    cut -= 1
            suffixes.append(chunk[cut:end])
            end = cut
        if not prefix and not suffix:
            break
    if start < end and _whole(chunk, start, end):
        words.append(chunk[start:end])
    elif start < end:
        middle, at = chunk[start:end], 0
        for infix in _INFIX.finditer(middle):
            if infix.start() > at:
                words.append(middle[at : infix.start()])
            words.append(infix.group())
            at = infix.end()
        if at < len(middle):
            words.append(middle[at:])
    words.extend(reversed(suffixes))
    return tuple(words)


_split_short = lru_cache(maxsize=1 << 16)(_split_affixes)


@dataclass(frozen=True)
class WordCounts:
    """What Gopher's word rules count of a document's tokens (`split_words`', or a
    segmenter's)."""

    words: int  # tokens that are not punctuation or symbols
    chars: int  # their characters
    symbols: int  # tokens with no letter, digit or underscore
    without_letter: int  # words with no letter: numbers, `12.1`, `_`
    distinct: frozenset[str]  # the distinct words


def word_counts(tokens: Sequence[str]) -> WordCounts:
    words = chars = symbols = without_letter = 0
    distinct = []
    for token, n in Counter(tokens).items():  # a document repeats its words: each once
        if token.isalnum():  # most words: no regex needed
            no_letter = token.isdecimal()
        elif is_symbol(token):
            symbols += n
            continue
        else:
            no_letter = not has_letter(token)
        words += n
        chars += n * len(token)
        without_letter += n * no_letter
        distinct.append(token)
    return WordCounts(words, chars, symbols, without_letter, frozenset(distinct))


def has_letter(word: str) -> bool:
    return _LETTER.search(word) is not None


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
