"""What the word-based filters may assume of a document's language.

Gopher's and C4's rules were written for English: Gopher wants two of eight English stop
words and a mean word length of 3 to 10 characters, C4 lines that end in `. ! ? "` and have
five words. Applied to Korean they drop most pages for having no English stop words; to
Chinese or Japanese, written without spaces, every "word" is a whole run of text. A
document's language (`cloze clean --language`, or what `--filters language` identified)
picks its settings here; a language without settings gets `FALLBACK`, which leaves out
every rule that only English justifies, so no document is dropped for not being English.

Where wordfreq (the `[languages]` extra; Speer's frequency lists of 40-odd languages from
Wikipedia, subtitles, news, books and the web) knows the language and splits it into the
same words as the filters do, the language gets Gopher's two rules measured on itself: its
eight most frequent words are its stop words, as Gopher's eight are English's, and the 3 to
10 character bounds on the mean word length are scaled by the language's mean word length
over English's (frequency-weighted, top 5,000 words: German 1.08, French 0.94, Chinese
and Japanese 0.38). Korean is left out: wordfreq counts its morphemes, the filters its
space-separated words. `.stats.json` says, per language, how many documents were filtered
and with which settings.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from clozeworks.corpus.text.filters.segmenters import available, segmenter
from clozeworks.corpus.text.filters.text import split_words
from clozeworks.corpus.text.sentences import DEFAULT_LANGUAGE

# Gopher's stop words (Rae et al. 2021, A.1.1), as datatrove has them.
ENGLISH_STOP_WORDS = frozenset(["the", "be", "to", "of", "and", "that", "have", "with"])
# What ends a sentence in C4's line rule, and the full-width marks of Chinese and Japanese.
LATIN_TERMINAL = (".", "!", "?", '"')
# ISO 639-2's code for a language not determined: no --language and no language filter.
UNDETERMINED = "und"
# An ISO 639 code, optionally with a region or script: ko, en-US, zh_CN, zh-Hant-TW.
_CODE = re.compile(r"[a-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*")
WIDE_TERMINAL = ("。", "！", "？", "」", "』")
# Runs of Chinese or Japanese (radicals, CJK punctuation, kana, ideographs, compatibility
# ideographs and forms, full-width forms, the supplementary ideographs): what a segmenter
# cuts; what lies between them is cut as spaced text.
_WIDE = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff]+")


@dataclass(frozen=True)
class LanguageSettings:
    """The assumptions one language's text allows; None leaves that rule out."""

    name: str
    # Gopher: distinct stop words a document must have (with its min_stop_words).
    stop_words: frozenset[str] | None
    # Gopher: its mean word length bounds (set for English) times this; None: no such rule.
    word_length_scale: float | None
    # Words can be counted (spaces between them, or a segmenter): Gopher's 50-word minimum,
    # its symbol, alphabetic-word and n-gram rules, C4's five words a line.
    word_rules: bool
    # C4: a kept line ends in one of these.
    terminal_punctuation: tuple[str, ...]
    # corpus/text/filters/segmenters.py: where words are not separated by spaces.
    segmenter: str | None = None
    # Gopher: added to its alphabetic-word threshold (set for English).
    alpha_words_shift: float = 0.0
    # Gopher's word counts and C4's words a line (set for English) times this.
    word_count_scale: float = 1.0
    # C4: sentences are counted by this language's rules (corpus/text/sentences.py).
    sentence_language: str = DEFAULT_LANGUAGE

    @property
    def longest_stop_word(self) -> int:
        return max(map(len, self.stop_words), default=0) if self.stop_words else 0


ENGLISH = LanguageSettings("en", ENGLISH_STOP_WORDS, 1.0, True, LATIN_TERMINAL)
FALLBACK = LanguageSettings("fallback", None, None, True, LATIN_TERMINAL + WIDE_TERMINAL)
# Written without spaces, and no segmenter: only line and paragraph rules.
UNSPACED = LanguageSettings("unspaced", None, None, False, LATIN_TERMINAL + WIDE_TERMINAL)
# Chinese and Japanese words are one to three characters: no English word-length bounds.
CHINESE = LanguageSettings("zh", None, None, True, LATIN_TERMINAL + WIDE_TERMINAL, "jieba")
JAPANESE = LanguageSettings("ja", None, None, True, LATIN_TERMINAL + WIDE_TERMINAL, "fugashi")

SETTINGS: dict[str, LanguageSettings] = {
    "en": ENGLISH,
    "zh": CHINESE,
    "ja": JAPANESE,
    "th": UNSPACED,
    "lo": UNSPACED,
    "km": UNSPACED,
    "my": UNSPACED,
}


# Gopher's list is eight words long.
STOP_WORDS_PER_LANGUAGE = 8
# Words whose mean length (weighted by frequency) scales the word-length bounds.
LENGTH_SAMPLE = 5000
# Our segmenter (None: words between spaces) -> wordfreq's tokenizer that finds the same
# words: its frequencies count what the filters count only where these agree.
WORDFREQ_TOKENIZER = {None: "regex", "jieba": "jieba", "fugashi": "mecab"}


@dataclass(frozen=True)
class Calibrated:
    """What `python bench/clean/calibrate.py` measured of a language on sections of four
    Debian manuals translated from English (68 to 273 sections a language), its words
    counted as the filters count them."""

    # Gopher's alphabetic-word threshold less English's 0.8: where the translations' share
    # of words with a letter drops as many sections as 0.8 drops of the English ones.
    alpha_words_shift: float
    # Median words of a translation per word of its English section: scales the word
    # counts the rules ask for (Gopher's 50 words, C4's five a line).
    words_per_english_word: float


CALIBRATED: dict[str, Calibrated] = {
    "de": Calibrated(-0.041, 1.00),
    "fr": Calibrated(0.006, 1.05),
    "it": Calibrated(0.012, 1.03),
    "nl": Calibrated(0.003, 1.09),
    "pt": Calibrated(0.012, 1.03),
    "ru": Calibrated(-0.036, 0.90),
    "ja": Calibrated(0.038, 1.30),
    "zh": Calibrated(-0.023, 0.96),
    "ko": Calibrated(-0.023, 0.69),
}


def _base_code(language: str) -> str:
    """An ISO 639 code without its region or script: `en-US`, `zh_CN` -> `en`, `zh`."""
    return language.replace("_", "-").split("-", 1)[0].lower()


def _registered(language: str | None) -> LanguageSettings:
    """The registry's settings of an ISO 639-1 code (a region suffix ignored); no language
    at all is English."""
    if not language:
        return ENGLISH
    return SETTINGS.get(_base_code(language), FALLBACK)


def segmenter_name(language: str | None) -> str | None:
    """The segmenter that finds the words of `language` (None: words are separated by
    spaces), whether or not it is installed."""
    return _registered(language).segmenter


@cache
def settings_for(language: str | None) -> LanguageSettings:
    """The settings of an ISO 639-1 code (see `_registered`); no language at all is
    English, as every filter assumed before languages were known. Sentences are counted
    by the language's rules (sentencex's, generic where it has none). A language whose
    segmenter is not installed counts no words; one that wordfreq or
    bench/clean/calibrate.py measured gets its own stop words, word lengths, word counts
    and alphabetic-word threshold, and is named by its code (see the module docstring)."""
    settings = _registered(language)
    if not language or settings is ENGLISH:
        return settings
    code = _base_code(language)
    if settings.segmenter is not None and not available(settings.segmenter):
        return replace(UNSPACED, sentence_language=code)
    settings = replace(settings, sentence_language=code)
    if not settings.word_rules:
        return settings
    measured = _measured(code, WORDFREQ_TOKENIZER[settings.segmenter])
    calibrated = CALIBRATED.get(code)
    if measured is None and calibrated is None:
        return settings
    if measured is not None:
        stop_words, scale = measured
        settings = replace(settings, stop_words=stop_words, word_length_scale=scale)
    if calibrated is not None:
        settings = replace(
            settings,
            alpha_words_shift=calibrated.alpha_words_shift,
            word_count_scale=calibrated.words_per_english_word,
        )
    return replace(settings, name=code)


@cache
def _measured(code: str, tokenizer: str) -> tuple[frozenset[str], float] | None:
    """(stop words, word-length scale) of `code` from wordfreq, or None where it is not
    installed, lacks the language, or splits it into other words than `tokenizer`'s."""
    if importlib.util.find_spec("wordfreq") is None:
        return None
    import wordfreq

    info = wordfreq.available_languages()
    if code not in info or wordfreq.language_info.get_language_info(code)["tokenizer"] != (
        tokenizer
    ):
        return None
    stop_words = frozenset(wordfreq.top_n_list(code, STOP_WORDS_PER_LANGUAGE))
    return stop_words, _mean_word_length(code) / _mean_word_length("en")


@cache
def _mean_word_length(code: str) -> float:
    import wordfreq

    by_frequency = sorted(wordfreq.get_frequency_dict(code).items(), key=lambda kv: -kv[1])
    top = list(itertools.islice(by_frequency, LENGTH_SAMPLE))
    return sum(len(w) * f for w, f in top) / sum(f for _, f in top)


def words_of(text: str, settings: LanguageSettings) -> list[str] | None:
    """The words (and punctuation tokens) of `text`: runs of Chinese or Japanese by the
    language's segmenter, everything between them (commands, file names, Latin words) as
    spaced text is split, so that it counts as it does in English; None where words are
    separated by spaces (the filters split them themselves)."""
    if settings.segmenter is None:
        return None
    segment = segmenter(settings.segmenter)
    words: list[str] = []
    start = 0
    for run in _WIDE.finditer(text):
        words += split_words(text[start : run.start()])
        words += segment(run.group())
        start = run.end()
    words += split_words(text[start:])
    return words


def is_language_code(text: str) -> bool:
    return _CODE.fullmatch(text) is not None


def declared_language(meta: str) -> str | None:
    """The language a document's meta (JSON) declares as `language`: a WARC/WET record's
    identified content language (ISO 639-3, most likely first: `kor,eng`), an HTTP
    Content-Language or a page's `lang` (`ko-KR`). Its first language as an ISO 639-1
    code when langcodes (the `[languages]` extra) can say it, a two-letter code as it is
    otherwise; None when there is none."""
    if '"language"' not in meta:
        return None
    value = json.loads(meta).get("language")
    if not isinstance(value, str) or not value.strip():
        return None
    first = value.split(",")[0].strip().replace("_", "-")
    code: str | None = first.split("-")[0].lower()
    if importlib.util.find_spec("langcodes") is not None:
        import langcodes

        try:
            code = langcodes.Language.get(first).language
        except (ValueError, LookupError):
            code = None
    if code is None or code == UNDETERMINED or not is_language_code(code):
        return None
    return code if len(code) == 2 else None


def settings_report(
    documents: Mapping[str, int], text_bytes: Mapping[str, int] | None = None
) -> dict[str, dict[str, Any]]:
    """`.stats.json`'s `languages`: per code (UNDETERMINED: English's settings), the
    documents filtered and their UTF-8 bytes, the name of the settings they got and what
    those hold."""
    report = {}
    for code, n in sorted(documents.items()):
        settings = settings_for(None if code == UNDETERMINED else code)
        report[code] = {
            "documents": n,
            "bytes": (text_bytes or {}).get(code, 0),
            "settings": settings.name,
            "stop_words": None if settings.stop_words is None else sorted(settings.stop_words),
            "word_length_scale": settings.word_length_scale,
            "alpha_words_shift": settings.alpha_words_shift,
            "word_count_scale": settings.word_count_scale,
            "segmenter": settings.segmenter,
        }
    return report
