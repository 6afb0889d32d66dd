"""Where Gopher's alphabetic-word rule sits in other languages (issue 36, item 2): measured on
the same manual pages in English and in translation.

    python bench/clean/calibrate.py

Gopher drops a document when fewer than 80% of its words have a letter. Punctuation and
symbols count as words, so the share depends on how a language is cut into words: Japanese,
cut by MeCab into particles and stems, has more words with a letter per symbol than English,
German's long compounds fewer. The same text translated should meet the rule alike, so each
language's threshold is English's moved by the median, over translated pairs, of (the
translation's share - the English page's share): what `corpus/text/filters/languages.py`
holds as `ALPHA_WORDS_SHIFT`. The pairs are Debian's translated manual pages
(`apt install manpages-de manpages-fr manpages-es manpages-ru manpages-ja manpages-zh`; the
Korean ones ship with the packages) beside the English page of the same name, rendered with
`man`. Manual pages are not the Debian Reference that bench/clean/languages.py measures the
result on, so the threshold is not fitted to the documents it is judged by.
"""

from __future__ import annotations

import os
import random
import subprocess
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from clozeworks.corpus.text.filters.languages import settings_for, words_of
from clozeworks.corpus.text.filters.text import (
    content_words,
    count_numeric_words,
    count_symbols,
    token_counts,
)

MAN = Path("/usr/share/man")
LANGUAGES = {"de": "de", "fr": "fr", "es": "es", "ru": "ru", "ja": "ja", "zh_CN": "zh", "ko": "ko"}
PAIRS_PER_LANGUAGE = 250
MIN_WORDS = 50  # Gopher's own minimum: shorter pages never reach the rule


def render(path: Path) -> str:
    """The page as `man` shows it; empty if groff does not finish in 30 s (troff loops
    forever on a few translated pages, zh_CN's df.1 among them)."""
    try:
        done = subprocess.run(["man", "-l", str(path)], capture_output=True, text=True,
                              env={**os.environ, "MANWIDTH": "100"}, check=False,
                              timeout=30)  # fmt: skip
    except subprocess.TimeoutExpired:
        return ""
    return done.stdout


def alpha_share(text: str, code: str) -> float | None:
    """Gopher's share of words with a letter, counted as GopherQualityFilter counts them
    for `code`; None below its 50 words."""
    settings = settings_for(code)
    tokens = words_of(text, settings)
    if tokens is None:
        content, symbols, numeric = (
            content_words(text), count_symbols(text), count_numeric_words(text)
        )  # fmt: skip
    else:
        content, symbols, numeric = token_counts(tokens)
    if len(content) < MIN_WORDS:
        return None
    return (len(content) - numeric) / (len(content) + symbols)


def pairs(lang: str) -> list[tuple[Path, Path]]:
    found = []
    for page in sorted((MAN / lang).rglob("*.gz")):
        english = MAN / page.relative_to(MAN / lang)
        if english.exists():
            found.append((english, page))
    return random.Random(0).sample(found, min(PAIRS_PER_LANGUAGE, len(found)))


def measure(job: tuple[Path, Path, str]) -> tuple[float | None, float | None]:
    english, page, code = job
    return alpha_share(render(english), "en"), alpha_share(render(page), code)


def main() -> None:
    print(f"load {os.getloadavg()[0]:.2f}\n")
    print("| language | pairs | English median | translation median | shift (median of "
          "differences) |")  # fmt: skip
    print("|---|---|---|---|---|")
    with ProcessPoolExecutor(os.cpu_count()) as pool:
        for lang, code in LANGUAGES.items():
            jobs = [(e, p, code) for e, p in pairs(lang)]
            got = [(a, b) for a, b in pool.map(measure, jobs, chunksize=8) if a and b]
            if not got:
                continue
            en, tr = np.array(got).T
            shift = float(np.median(tr - en))
            print(f"| {code} | {len(got)} | {np.median(en):.3f} | {np.median(tr):.3f} | "
                  f"{shift:+.3f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
