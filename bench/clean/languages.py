"""The same documentation in English and in translation through the filters (issue 36, items
2 and 3): the share of sections each language keeps, before and after the filters knew the
language.

    python bench/clean/languages.py [--leave-out]

The documents are the second-level sections of three Debian manuals (bench/clean/
debian_docs.py; `apt install` the packages named there): the Debian Reference (English,
German, Japanese, Simplified Chinese), the New Maintainers' Guide (English, German,
Japanese, French, Russian) and the FAQ (English, German, Japanese, Simplified Chinese,
Korean), each table on the sections fully translated into all of its languages. "before":
the filters with English's rules for every document, as clean ran them until languages
were known; "after": with the language given (wordfreq's stop words and word lengths, the
calibrated thresholds and word counts, jieba and fugashi words).

bench/clean/calibrate.py fits the thresholds on these manuals and the Developer's
Reference, so each "after" row is in-sample; `--leave-out` judges each manual with the
thresholds fitted on the other manuals instead (a cell marked * has no other manual in its
language and keeps the shipped value).

Last, each language's keep share less English's on the same sections of all three
manuals together, with a 95% interval: one manual's 65 to 70 sections cannot tell a
5-point difference from none where many sections sit near a threshold.

Then the agreement of our `c4,gopher` decisions ("after") with datatrove's C4QualityFilter
(C4's code thresholds, as bench/clean/run.py sets them), GopherRepetition- and
GopherQualityFilter, each told the language (its word tokenizer: spaCy's, SudachiPy for
Japanese; needs `pip install spacy sudachipy sudachidict_core`).
"""

from __future__ import annotations

import argparse
import math
import os

from calibrate import Pair, leave_out, pairs_by_language
from debian_docs import CODES, in_every_language

from clozeworks.corpus.text.filters import build_filters, languages
from clozeworks.corpus.text.filters.base import apply_filters

TABLES = {
    "reference": ["en", "de", "ja", "zh-cn"],
    "guide": ["en", "de", "ja", "fr", "ru"],
    "faq": ["en", "de", "ja", "zh-cn", "ko"],
}
FILTER_SETS = ("length", "c4,gopher", "c4", "gopher")


# (filter set, language) -> per section, (English kept, translation kept), every manual.
Pairs = dict[tuple[str, str], list[tuple[bool, bool]]]


# A manual's sections: lang -> anchor -> text, and the anchors fully translated in all.
Loaded = tuple[dict[str, dict[str, str]], list[str]]


def keep_table(
    manual: str, loaded: Loaded, fitted: dict[str, list[Pair]] | None, pooled: Pairs
) -> None:
    """The manual's keep shares; with `fitted` (calibrate.py's pairs), under the thresholds
    the other manuals give."""
    langs = TABLES[manual]
    texts, keys = loaded
    print(f"\n{manual}: {len(keys)} sections fully translated in all of {', '.join(langs)}\n")
    shipped = dict(languages.CALIBRATED)
    in_sample = set()
    if fitted is not None:
        for code, pairs in fitted.items():
            other = leave_out(pairs, manual)
            if other is None:
                in_sample.add(code)
            else:
                languages.CALIBRATED[code] = other
        languages.settings_for.cache_clear()
    try:
        print(f"| filters | {' | '.join(langs)} |")
        print(f"|---|{'---|' * len(langs)}")
        for names in FILTER_SETS:
            for when in ("before", "after"):
                if names == "length" and when == "after":
                    continue
                filters = build_filters(names.split(","))
                kept = {}
                for lang in langs:
                    language = CODES[lang] if when == "after" else None
                    kept[lang] = [
                        apply_filters(texts[lang][k], filters, language).keep for k in keys
                    ]
                cells = []
                for lang in langs:
                    mark = "*" if when == "after" and CODES[lang] in in_sample else ""
                    cells.append(f"{100 * sum(kept[lang]) / max(1, len(keys)):.0f}%{mark}")
                    if lang != "en" and (when == "after" or names == "length"):
                        pairs = zip(kept["en"], kept[lang], strict=True)
                        pooled.setdefault((names, lang), []).extend(pairs)
                label = names if names == "length" else f"{names}, {when}"
                print(f"| {label} | {' | '.join(cells)} |")
    finally:
        languages.CALIBRATED.clear()
        languages.CALIBRATED.update(shipped)
        languages.settings_for.cache_clear()


def difference(pairs: list[tuple[bool, bool]]) -> str:
    """The translation's keep share less English's on the same sections, in points, with
    a 95% interval for paired proportions (only sections one keeps and the other drops
    move it, so the interval is wide where many sit near a threshold)."""
    n = len(pairs)
    only_en = sum(e and not t for e, t in pairs)
    only_tr = sum(t and not e for e, t in pairs)
    diff = (only_tr - only_en) / n
    spread = 1.96 * math.sqrt(max(0.0, (only_en + only_tr) / n - diff**2) / n)
    return f"{100 * diff:+.1f} ± {100 * spread:.1f}"


def pooled_table(pooled: Pairs) -> None:
    langs = sorted({lang for _, lang in pooled}, key=list(CODES).index)
    print("\n| all three manuals: translation less English, points | "
          f"{' | '.join(langs)} |")  # fmt: skip
    print(f"|---|{'---|' * len(langs)}")
    sizes = [str(len(pooled[("length", lang)])) for lang in langs]
    print(f"| sections | {' | '.join(sizes)} |")
    for names in FILTER_SETS:
        print(f"| {names} | {' | '.join(difference(pooled[(names, lang)]) for lang in langs)} |")


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


def agreement(manual: str, loaded: Loaded) -> None:
    langs = TABLES[manual]
    texts, keys = loaded
    filters = build_filters(["c4", "gopher"])
    print(f"\n| agreement with datatrove, c4,gopher ({manual}) | {' | '.join(langs)} |")
    print(f"|---|{'---|' * len(langs)}")
    cells, kept = [], []
    for lang in langs:
        code = CODES[lang]
        theirs = [datatrove_keeps(texts[lang][k], code) for k in keys]
        ours = [apply_filters(texts[lang][k], filters, code).keep for k in keys]
        same = sum(a == b for a, b in zip(ours, theirs, strict=True))
        cells.append(f"{100 * same / max(1, len(keys)):.0f}%")
        kept.append(f"{100 * sum(theirs) / max(1, len(keys)):.0f}%")
    print(f"| same keep/drop decision | {' | '.join(cells)} |")
    print(f"| datatrove keeps | {' | '.join(kept)} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--leave-out",
        action="store_true",
        help="judge each manual with the thresholds fitted on the other manuals",
    )
    args = parser.parse_args(argv)
    print(f"load {os.getloadavg()[0]:.2f}")
    fitted = pairs_by_language() if args.leave_out else None
    loaded = {manual: in_every_language(manual, langs) for manual, langs in TABLES.items()}
    pooled: Pairs = {}
    for manual in TABLES:
        keep_table(manual, loaded[manual], fitted, pooled)
    pooled_table(pooled)
    if not args.leave_out:
        agreement("reference", loaded["reference"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
