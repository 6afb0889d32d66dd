"""Our word splitting beside spaCy's English tokenizer, which datatrove's Gopher and C4
filters count words with (issue 36, item 2).

    python bench/clean/words.py    # needs `pip install spacy`

Gopher's rules are shares of words: words with a letter (80%), symbols per word, stop
words. Whatever splits the words sets where a document falls, so on the same documents
this compares `corpus/text/filters/text.split_words` with `spacy.blank("en")`'s tokenizer:
how often the token lists are identical, how far apart the share of words with a letter
is, how often the two fall on the same side of Gopher's 0.8, the speed of each (one
process, one run, back to back), and how often our `gopher-quality` filter decides as
datatrove's GopherQualityFilter (`pip install datatrove`).

The documents are realistic ones that ship with Debian: every package's copyright file
(licences, names, e-mail addresses, paths) and the English sections of four Debian
manuals (bench/clean/debian_docs.py).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from debian_docs import MANUALS

from clozeworks.corpus.text.filters import build_filters, text
from clozeworks.corpus.text.filters.base import apply_filters
from clozeworks.corpus.text.filters.text import has_letter, split_words


def documents() -> list[str]:
    docs = []
    for path in sorted(Path("/usr/share/doc").glob("*/copyright")):
        try:
            docs.append(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue  # a few are Latin-1, or dangling links
    for manual in MANUALS.values():
        docs += manual("en").values()
    return docs


def cold() -> None:
    """Forget the split chunks and document that `split_words` remembers, so that each
    timing starts as a fresh process would."""
    text._split_short.cache_clear()
    text._split_words.cache_clear()


def alpha_share(words: list[str]) -> float:
    return sum(map(has_letter, words)) / max(1, len(words))


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    import spacy

    docs = documents()
    megabytes = sum(map(len, docs)) / 1e6
    filter_speed = {}
    for names in ("gopher", "c4,gopher"):
        cold()
        filters = build_filters(names.split(","))
        start = time.perf_counter()
        for d in docs:
            apply_filters(d, filters)
        filter_speed[names] = megabytes / (time.perf_counter() - start)
    tokenizer = spacy.blank("en").tokenizer
    start = time.perf_counter()
    theirs = [[t.text for t in tokenizer(d) if not t.is_space] for d in docs]
    spacy_s = time.perf_counter() - start
    cold()
    start = time.perf_counter()
    ours = [split_words(d) for d in docs]
    ours_s = time.perf_counter() - start
    a = np.array([alpha_share(w) for w in ours])
    b = np.array([alpha_share(w) for w in theirs])
    print(f"{len(docs)} documents, {megabytes:.1f} MB; load {os.getloadavg()[0]:.2f}\n")
    print("| | ours | spaCy |")
    print("|---|---|---|")
    print(f"| MB/s | {megabytes / ours_s:.1f} | {megabytes / spacy_s:.1f} |")
    same = np.mean([o == t for o, t in zip(ours, theirs, strict=True)])
    print(f"| identical token lists | {same:.1%} | |")
    print(
        f"| share of words with a letter, mean absolute difference | {np.mean(abs(a - b)):.4f} | |"
    )
    print(f"| same side of 0.8 | {np.mean((a >= 0.8) == (b >= 0.8)):.1%} | |")
    for names, speed in filter_speed.items():
        print(f"| `--filters {names}`, MB/s | {speed:.1f} | |")
    ours_keep = [apply_filters(d, build_filters(["gopher-quality"])).keep for d in docs]
    same = np.mean([o == t for o, t in zip(ours_keep, datatrove_keeps(docs), strict=True)])
    print(f"| gopher-quality decides as datatrove's GopherQualityFilter | {same:.1%} | |")
    return 0


def datatrove_keeps(docs: list[str]) -> list[bool]:
    from datatrove.data import Document
    from datatrove.pipeline.filters import GopherQualityFilter

    step = GopherQualityFilter()
    verdicts = (step.filter(Document(text=d, id=str(i))) for i, d in enumerate(docs))
    return [v is True or (isinstance(v, tuple) and v[0]) for v in verdicts]


if __name__ == "__main__":
    raise SystemExit(main())
