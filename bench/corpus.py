"""Benchmark corpora made locally from realistic text (no downloads).

Pages are runs of real paragraphs (bench/scale/corpus.py: Python's reST docs, Debian
copyright files, man pages; `apt-get install python3.11-doc`), several KB each, with words
shuffled a little so pages differ; planted near-duplicates are copies with words
substituted until their word-5-gram Jaccard similarity with the original reaches a target.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

from bench.scale.corpus import paragraphs
from clozeworks.corpus.dedup.minhash import Shingler, jaccard


def realistic_texts(megabytes: float = 10.0, seed: int = 0) -> list[str]:
    """bench/scale/corpus.py's documents (several KB of real prose each) until they hold
    `megabytes` of UTF-8 text."""
    from bench.scale.corpus import documents

    out, size = [], 0
    for text in documents(seed):
        out.append(text)
        size += len(text.encode())
        if size >= megabytes * 1e6:
            return out
    raise AssertionError("documents() is endless")


def pages(seed: int = 0) -> Iterator[str]:
    """Endless web-page-like documents of 3-12 paragraphs."""
    rng = random.Random(seed)
    pool = paragraphs()
    while True:
        parts = []
        for text in rng.sample(pool, rng.randint(3, 12)):
            words = text.split()
            for _ in range(len(words) // 20):
                i = rng.randrange(len(words))
                j = min(len(words) - 1, i + 1)
                words[i], words[j] = words[j], words[i]
            parts.append(" ".join(words))
        yield "\n\n".join(parts)


def write_pages(path: Path, megabytes: float, seed: int = 0) -> int:
    """Write page documents as JSON lines (with an `id` field) until the file reaches the
    size; returns the number of documents."""
    path.parent.mkdir(parents=True, exist_ok=True)
    limit = int(megabytes * (1 << 20))
    n = 0
    with path.open("w", encoding="utf-8") as f:
        for n, text in enumerate(pages(seed), start=1):
            f.write(json.dumps({"id": f"p{n:09d}", "text": text}) + "\n")
            if f.tell() >= limit:
                break
    return n


def edited(
    rng: random.Random, words: list[str], target: float, shingler: Shingler, vocab: list[str]
) -> list[str]:
    original = shingler(" ".join(words))
    copy = list(words)
    while jaccard(original, shingler(" ".join(copy))) > target:
        copy[rng.randrange(len(copy))] = rng.choice(vocab)
    return copy


def write_planted(path: Path, originals: int, seed: int = 1) -> list[tuple[str, str, str]]:
    """Originals, a copy of each at Jaccard ~0.9 and a look-alike at ~0.5, shuffled, as JSON
    lines. Returns (original, copy, look-alike) ids."""
    rng = random.Random(seed)
    shingler = Shingler(5)
    source = pages(seed)
    vocab = sorted({w for text in paragraphs()[:2000] for w in text.split()})
    records, triples = [], []
    for i in range(originals):
        words = next(source).split()[: rng.randrange(200, 500)]
        copy = edited(rng, words, rng.uniform(0.87, 0.93), shingler, vocab)
        alike = edited(rng, words, rng.uniform(0.45, 0.55), shingler, vocab)
        ids = (f"o{i:06d}", f"c{i:06d}", f"l{i:06d}")
        triples.append(ids)
        for doc_id, w in zip(ids, (words, copy, alike), strict=True):
            records.append({"id": doc_id, "text": " ".join(w)})
    rng.shuffle(records)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return triples
