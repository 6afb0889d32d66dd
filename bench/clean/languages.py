"""The same documentation in English and in translation through the filters (issue 36, items
2 and 3): the share of sections each language keeps, before and after the filters knew the
language.

    python bench/clean/languages.py

The text is the Debian Reference (`apt install debian-reference-en debian-reference-de
debian-reference-ja debian-reference-zh-cn`): each `<div class="section">` of the second
level (5.1, 5.2, ...) is a document, matched across languages by its anchor. A section
counts as fully translated when py3langid names its language with a score of 0.9 or more
(commands and file names stay English in every translation), and only sections translated
in every language are compared. "before": the filters with English's rules for every
document, as clean ran them until now; "after": with `--filters language,...` naming the
language first. Then the agreement of our `c4,gopher` decisions ("after") with datatrove's
C4QualityFilter (C4's code thresholds, as bench/clean/run.py sets them), GopherRepetition-
and GopherQualityFilter, each told the language (its word tokenizer: spaCy's, SudachiPy for
Japanese; needs `pip install spacy sudachipy sudachidict_core`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from clozeworks.corpus.text.filters import build_filters
from clozeworks.corpus.text.filters.base import apply_filters
from clozeworks.corpus.text.filters.language import load_backend

sys.path.insert(0, str(Path(__file__).parent))
from calibrate import docbook_sections, faq_sections

ROOT = Path("/usr/share/debian-reference")
LANGUAGES = {"en": "en", "de": "de", "ja": "ja", "zh-cn": "zh"}
FAQ_LANGUAGES = {"en": "en", "de": "de", "ja": "ja", "zh-cn": "zh", "ko": "ko"}
GUIDE = Path("/usr/share/doc")
GUIDE_LANGUAGES = {"en": "en", "de": "de", "ja": "ja", "fr": "fr", "ru": "ru"}
FILTER_SETS = ("length", "c4,gopher", "c4", "gopher")


def sections(lang: str) -> dict[str, str]:
    """Anchor -> text of every second-level section of every chapter of the Reference."""
    return docbook_sections(sorted(ROOT.glob(f"*.{lang}.html")))


def guide_sections(lang: str) -> dict[str, str]:
    """The same of the New Maintainers' Guide."""
    where = GUIDE / "maint-guide" if lang == "en" else GUIDE / f"maint-guide-{lang}"
    return docbook_sections(sorted((where / "html").glob(f"*.{lang}.html")))


def fully_translated(texts: dict[str, dict[str, str]], codes: dict[str, str]) -> list[str]:
    """The sections every language has, each in its own language by py3langid (score 0.9)."""
    langid = load_backend("langid")
    shared = set.intersection(*(set(t) for t in texts.values()))
    return sorted(
        key
        for key in shared
        if all(
            (pred := langid.predict(texts[lang][key]))[0] == code and pred[1] >= 0.9
            for lang, code in codes.items()
        )
    )


def keep_table(texts: dict[str, dict[str, str]], codes: dict[str, str], keys: list[str]) -> None:
    print(f"| filters | {' | '.join(codes)} |")
    print(f"|---|{'---|' * len(codes)}")
    for names in FILTER_SETS:
        for when in ("before", "after"):
            if names == "length" and when == "after":
                continue
            filters = build_filters(names.split(","))
            cells = []
            for lang, code in codes.items():
                language = code if when == "after" else None
                kept = sum(apply_filters(texts[lang][k], filters, language).keep for k in keys)
                cells.append(f"{100 * kept / max(1, len(keys)):.0f}%")
            label = names if names == "length" else f"{names}, {when}"
            print(f"| {label} | {' | '.join(cells)} |")


def main() -> None:
    texts = {lang: sections(lang) for lang in LANGUAGES}
    full = fully_translated(texts, LANGUAGES)
    print(f"Debian Reference: {len(full)} sections fully translated in all of "
          f"{', '.join(LANGUAGES)}; load {os.getloadavg()[0]:.2f}\n")  # fmt: skip
    keep_table(texts, LANGUAGES, full)
    agreement(texts, full)
    guide = {lang: guide_sections(lang) for lang in GUIDE_LANGUAGES}
    guide_full = fully_translated(guide, GUIDE_LANGUAGES)
    print(f"\nDebian New Maintainers' Guide: {len(guide_full)} sections fully translated in "
          f"all of {', '.join(GUIDE_LANGUAGES)}\n")  # fmt: skip
    keep_table(guide, GUIDE_LANGUAGES, guide_full)
    # Korean has no Reference or Guide; its FAQ is packaged, but the FAQ is also what
    # calibrate.py measures the alphabetic-word threshold on (in-sample for that rule).
    faq = {lang: faq_sections(None if lang == "en" else lang) for lang in FAQ_LANGUAGES}
    faq_full = fully_translated(faq, FAQ_LANGUAGES)
    print(f"\nDebian FAQ (calibrate.py's own sections): {len(faq_full)} sections fully "
          f"translated in all of {', '.join(FAQ_LANGUAGES)}\n")  # fmt: skip
    keep_table(faq, FAQ_LANGUAGES, faq_full)


def datatrove_keeps(text: str, code: str) -> bool:
    from datatrove.data import Document
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )

    doc = Document(text=text, id="x")
    steps = [
        C4QualityFilter(min_num_sentences=3, min_words_per_line=5, language=code),
        GopherRepetitionFilter(language=code),
        GopherQualityFilter(language=code),
    ]
    for step in steps:
        verdict = step.filter(doc)
        if verdict is False or (isinstance(verdict, tuple) and not verdict[0]):
            return False
    return True


def agreement(texts: dict[str, dict[str, str]], keys: list[str]) -> None:
    filters = build_filters(["c4", "gopher"])
    print("\n| agreement with datatrove, c4,gopher | " + " | ".join(LANGUAGES) + " |")
    print(f"|---|{'---|' * len(LANGUAGES)}")
    cells, kept = [], []
    for lang, code in LANGUAGES.items():
        theirs = [datatrove_keeps(texts[lang][k], code) for k in keys]
        ours = [apply_filters(texts[lang][k], filters, code).keep for k in keys]
        same = sum(a == b for a, b in zip(ours, theirs, strict=True))
        cells.append(f"{100 * same / max(1, len(keys)):.0f}%")
        kept.append(f"{100 * sum(theirs) / max(1, len(keys)):.0f}%")
    print(f"| same keep/drop decision | {' | '.join(cells)} |")
    print(f"| datatrove keeps | {' | '.join(kept)} |")


if __name__ == "__main__":
    main()
