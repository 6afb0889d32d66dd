"""C4's line and page rules (Raffel et al. 2020, "Exploring the Limits of Transfer Learning
with a Unified Text-to-Text Transformer", §2.2), with the thresholds of the code that built
C4: `tensorflow_datasets/text/c4_utils.py` (`clean_page`). The paper's prose says 3 words per
line and 5 sentences per page; the code used 5 and 3, and so do we.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from clozeworks.corpus.text.filters.base import FilterResult
from clozeworks.corpus.text.filters.languages import ENGLISH, LanguageSettings, words_of
from clozeworks.corpus.text.sentences import split_sentences

_CITATION = re.compile(r"\[\d*\]|\[edit\]|\[citation needed\]")
_ELLIPSIS = "..."
_POLICY = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)


@dataclass(frozen=True)
class C4Filter:
    """Keeps lines that end in terminal punctuation and have enough words; drops pages with
    "lorem ipsum" or a curly bracket, and pages left with too few sentences."""

    name: ClassVar[str] = "c4"
    min_words_per_line: int = field(default=5, metadata={"help": "shorter lines are removed"})
    min_sentences: int = field(
        default=3, metadata={"help": "pages with fewer sentences (after line removal) are dropped"}
    )
    max_word_length: int = field(
        default=1000, metadata={"help": "lines with a longer word are removed"}
    )
    remove_citations: bool = field(
        default=True, metadata={"help": "strip [1], [edit], [citation needed]"}
    )
    terminal_punct: bool = field(
        default=True, metadata={"help": "remove lines not ending in . ? ! or a quote"}
    )
    javascript: bool = field(default=True, metadata={"help": "remove lines mentioning javascript"})
    policy: bool = field(default=True, metadata={"help": "remove cookie / terms-of-use lines"})
    lorem_ipsum: bool = field(default=True, metadata={"help": "drop pages with lorem ipsum"})
    curly_bracket: bool = field(default=True, metadata={"help": "drop pages containing {"})

    def filter(self, text: str) -> FilterResult:
        return self.filter_in(text, ENGLISH)

    def filter_in(self, text: str, language: LanguageSettings) -> FilterResult:
        """C4's rules with the line ends `language` writes (。 for Chinese and Japanese); the
        words-per-line rule only where words are spaced."""
        end_marks = language.terminal_punctuation
        min_words = (
            self.min_words_per_line * language.word_count_scale if language.word_rules else 0
        )
        kept: list[str] = []
        sentences = 0
        for raw_line in text.splitlines():
            line = raw_line.strip()
            if any(len(word) > self.max_word_length for word in line.split()):
                continue
            if self.remove_citations:
                # c4_utils strips before removing "[1]", so "sentence. [1]" lost its period
                # and its line; extractors put that space where a marker is its own element.
                line = _CITATION.sub("", line).rstrip()
            if self.terminal_punct and (not line.endswith(end_marks) or line.endswith(_ELLIPSIS)):
                continue
            words = words_of(line, language)
            if len(line.split() if words is None else words) < min_words:
                continue
            lower = line.lower()
            if self.lorem_ipsum and "lorem ipsum" in lower:
                return FilterResult.drop("lorem_ipsum")
            if self.javascript and "javascript" in lower:
                continue
            if self.curly_bracket and "{" in line:
                return FilterResult.drop("curly_bracket")
            if self.policy and any(p in lower for p in _POLICY):
                continue
            sentences += len(split_sentences(line, language.sentence_language))
            kept.append(line)
        if sentences < self.min_sentences:
            return FilterResult.drop("too_few_sentences")
        return FilterResult.kept("\n".join(kept).strip())
