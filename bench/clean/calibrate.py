"""Where Gopher's alphabetic-word rule and the word counts sit in other languages (issue 36,
items 2 and 3): measured on the same documentation in English and in translation.

    python bench/clean/calibrate.py

Gopher drops a document when fewer than 80% of its words have a letter. Punctuation and
symbols count as words, so the share depends on how a language is cut into words and how
it punctuates: Japanese, cut by MeCab into particles and stems, has more words with a
letter per mark than English; German, with a comma before every subordinate clause, and
Russian fewer. The same text translated should meet the rule alike, so each language's
threshold is the one that drops as many translated sections as 0.8 drops English ones
(quantile matching, as FineWeb-2 sets its per-language thresholds): what
`corpus/text/filters/languages.py` holds in `CALIBRATED`, beside the median words of a
translation per word of its English section (which scales the word counts the rules ask
for).

The sections are those of four Debian manuals (bench/clean/debian_docs.py: the FAQ, the
Developer's Reference, the Debian Reference, the New Maintainers' Guide; `apt install`
the packages named there), matched with their English originals by anchor, where
py3langid names both languages with a score of 0.9 or more and the English has Gopher's
50 words, pooled. Pooled, because one manual leaves too few English sections near 0.8 to
place a quantile (5% of the FAQ's sections are below it, 61% of the Reference's), and
each manual's translators write a little differently. The last columns are each
manual left out: the threshold the other manuals give, which is what
`python bench/clean/languages.py --leave-out` judges that manual with.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

import numpy as np
from debian_docs import CODES, MANUALS, translated

from clozeworks.corpus.text.filters.languages import Calibrated, settings_for, words_of
from clozeworks.corpus.text.filters.text import split_words, word_counts

MIN_WORDS = 50  # Gopher's own minimum: shorter English sections never reach the rule
ENGLISH_THRESHOLD = 0.8  # Gopher's min_alpha_words_ratio


@dataclass(frozen=True)
class Pair:
    manual: str
    english_share: float
    english_words: int
    share: float
    words: int


def counts(text: str, code: str) -> tuple[float, int] | None:
    """(Gopher's share of words with a letter, its count of words) as GopherQualityFilter
    counts them for `code`; None without words."""
    settings = settings_for(code)
    tokens = words_of(text, settings)
    counts = word_counts(split_words(text) if tokens is None else tokens)
    if not counts.words:
        return None
    share = (counts.words - counts.without_letter) / (counts.words + counts.symbols)
    return share, counts.words


def pairs_by_language() -> dict[str, list[Pair]]:
    """ISO code -> every (English, translation) section pair of every manual."""
    out: dict[str, list[Pair]] = {}
    for manual in MANUALS:
        english = translated(manual, "en")
        for lang, code in CODES.items():
            if lang == "en":
                continue
            for key, text in translated(manual, lang).items():
                if key not in english:
                    continue
                ours, theirs = counts(english[key], "en"), counts(text, code)
                if ours is not None and theirs is not None and ours[1] >= MIN_WORDS:
                    out.setdefault(code, []).append(Pair(manual, *ours, *theirs))
    return out


def threshold(pairs: list[Pair]) -> float:
    """The translations' share below which as many of them fall as English ones below 0.8."""
    english = np.array([p.english_share for p in pairs])
    below = float(np.mean(english < ENGLISH_THRESHOLD))
    return float(np.quantile([p.share for p in pairs], below))


def calibrate(pairs: list[Pair]) -> Calibrated:
    ratio = float(np.median([p.words / p.english_words for p in pairs]))
    return Calibrated(round(threshold(pairs) - ENGLISH_THRESHOLD, 3), round(ratio, 2))


def leave_out(pairs: list[Pair], manual: str) -> Calibrated | None:
    """What the other manuals give; None where only `manual` has the language."""
    rest = [p for p in pairs if p.manual != manual]
    return calibrate(rest) if rest else None


def threshold_of(calibrated: Calibrated) -> float:
    return ENGLISH_THRESHOLD + calibrated.alpha_words_shift


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    by_language = pairs_by_language()
    print(f"load {os.getloadavg()[0]:.2f}\n")
    print("| language | sections (" + ", ".join(MANUALS) + ") | English below 0.8 | threshold "
          "| shift | words per English word | " + " | ".join(f"without {m}" for m in MANUALS)
          + " |")  # fmt: skip
    print(f"|---|---|---|---|---|---|{'---|' * len(MANUALS)}")
    for code, pairs in by_language.items():
        found = calibrate(pairs)
        sizes = "/".join(str(sum(p.manual == m for p in pairs)) for m in MANUALS)
        below = np.mean([p.english_share < ENGLISH_THRESHOLD for p in pairs])
        left = []
        for manual in MANUALS:
            other = leave_out(pairs, manual) if any(p.manual == manual for p in pairs) else None
            left.append("" if other is None else f"{threshold_of(other):.3f}")
        print(f"| {code} | {sizes} | {below:.1%} | {threshold_of(found):.3f} "
              f"| {found.alpha_words_shift:+.3f} | {found.words_per_english_word:.2f} | "
              f"{' | '.join(left)} |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
