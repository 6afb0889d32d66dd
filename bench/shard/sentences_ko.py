"""Korean sentences: sentencex (what clozeworks splits with) against kss, on Korean text
whose sentence ends are known (issue 54, item 6).

    python bench/shard/sentences_ko.py        # in an environment with kss: see below

The sentences are the Korean translations Debian installs for its programs' messages
(/usr/share/locale/ko/LC_MESSAGES/*.mo, 70 catalogs here): each message that is one
sentence (it ends in 다. 요. 니까? and holds no other sentence end followed by a space),
drawn at random into paragraphs of 3 to 8 sentences, so every boundary is known. Two
versions of the same paragraphs: as written (a space after each sentence's full stop),
and with the full stops removed, as Korean comments and chat are often written (the case
kss was built for). Counted per boundary: precision, recall and F1 of the cuts each
splitter makes inside a paragraph; and paragraphs per second.

kss is not a dependency of clozeworks: `python -m venv /tmp/kss && /tmp/kss/bin/pip
install kss sentencex python-mecab-ko` (kss's MeCab backend, its fastest; without it kss
falls back to its pure-Python analyzer).
"""

from __future__ import annotations

import gettext
import os
import random
import re
import time
from pathlib import Path

import sentencex

CATALOGS = Path("/usr/share/locale/ko/LC_MESSAGES")
ONE_SENTENCE = re.compile(r"^[^\n]{12,}(?:다\.|요\.|니까\?)$")
INSIDE_END = re.compile(r"[.!?]\s")


def sentences() -> list[str]:
    out = set()
    for path in sorted(CATALOGS.glob("*.mo")):
        with path.open("rb") as f:
            catalog = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
        for value in catalog.values():
            text = value.strip() if isinstance(value, str) else ""
            if ONE_SENTENCE.match(text) and not INSIDE_END.search(text) and "%" not in text:
                out.add(text)
    return sorted(out)


def paragraphs(pool: list[str], n: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    return [rng.sample(pool, rng.randint(3, 8)) for _ in range(n)]


def cuts_of(parts: list[str], text: str) -> set[int]:
    """Offsets in `text` where the pieces after the first start (found left to right)."""
    found, at = set(), 0
    for k, part in enumerate(parts):
        part = part.strip()
        if not part:
            continue
        at = text.find(part, at)
        if at < 0:
            raise AssertionError(f"piece not in text: {part!r}")
        if k:
            found.add(at)
        at += len(part)
    return found


def score(split, docs: list[list[str]], stops: bool) -> tuple[float, float, float, float]:
    """(precision, recall, F1, paragraphs per second) of `split` on `docs`."""
    texts, gold = [], []
    for doc in docs:
        parts = doc if stops else [s[:-1] for s in doc]
        text = " ".join(parts)
        texts.append(text)
        gold.append(cuts_of(parts, text))
    start = time.perf_counter()
    found = [cuts_of(split(t), t) for t in texts]
    rate = len(texts) / (time.perf_counter() - start)
    hit = sum(len(f & g) for f, g in zip(found, gold, strict=True))
    cut, want = sum(map(len, found)), sum(map(len, gold))
    precision, recall = hit / max(cut, 1), hit / want
    return precision, recall, 2 * precision * recall / max(precision + recall, 1e-9), rate


def main() -> int:
    import kss

    pool = sentences()
    docs = paragraphs(pool, 400, seed=0)
    print(f"{len(pool):,} one-sentence messages, {len(docs)} paragraphs; "
          f"load {os.getloadavg()[0]:.2f}")  # fmt: skip
    splitters = {
        "sentencex (ko)": lambda t: sentencex.segment("ko", t),
        "kss (mecab)": lambda t: kss.split_sentences(t, backend="mecab"),
        "kss (punct)": lambda t: kss.split_sentences(t, backend="punct"),
    }
    for split in splitters.values():
        split("워밍업 문장입니다. 두 번째 문장입니다.")
    print(f"{'splitter':16} {'text':18} {'precision':>9} {'recall':>7} {'F1':>6} {'para/s':>9}")
    for stops, label in ((True, "with full stops"), (False, "without full stops")):
        for name, split in splitters.items():
            p, r, f1, rate = score(split, docs, stops)
            print(f"{name:16} {label:18} {p:9.1%} {r:7.1%} {f1:6.1%} {rate:9,.0f}")
    print(f"load at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
