"""Morpheme-aware vocabularies (issue 54, item 1): Kiwi against MeCab-ko, and WordPiece and
byte-level BPE and Unigram trained on words against the same trained on morphemes.

    python bench/vocab/morphemes.py [--vocab-size 4000]

The text is the manual pages Debian installs in Korean (/usr/share/man/ko, rendered with
`man`), a paragraph a document: nine in ten train, one in ten is held out.

1. The analyzers on all of it, one after the other in this process: MB/s of UTF-8 text,
   morpheme boundaries inside words found, and how many boundaries the two share.
2. Each kind trained on the nine tenths as words and as morphemes (MeCab-ko), measured on
   the held-out tenth: the share of cuts between pieces inside a word that fall on
   MeCab-ko's boundaries (precision) and of those boundaries that are cuts (recall), tokens
   per eojeol (space-separated word), the UNK rate, and the training time (for morphemes,
   the analysis included).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.namuwiki.run import korean_paragraphs
from clozeworks.corpus.vocab.morphemes import ANALYZERS, boundaries
from clozeworks.corpus.vocab.train import VocabConfig, train_tokenizer


def analyzers(texts: list[str]) -> dict[str, list[list[int]]]:
    size = sum(len(t.encode()) for t in texts)
    found = {}
    for name in ANALYZERS:
        boundaries("워밍업 문장입니다", name)  # load the model or dictionary first
        start = time.perf_counter()
        found[name] = [boundaries(t, name) for t in texts]
        seconds = time.perf_counter() - start
        total = sum(map(len, found[name]))
        print(f"{name:6} {size / 1e6 / seconds:6.2f} MB/s  {total:,} boundaries inside words")
    shared = sum(len(set(a) & set(b)) for a, b in zip(*found.values(), strict=True))
    shares = ", ".join(f"{shared / sum(map(len, v)):.1%} of {k}'s" for k, v in found.items())
    print(f"shared: {shared:,} ({shares})")
    return found


def agreement(tok, texts: list[str], cuts_of: list[list[int]]) -> dict[str, float]:
    on = cuts = bounds = tokens = words = unk = 0
    unk_id = tok.token_to_id("[UNK]")
    if unk_id is None:
        unk_id = tok.token_to_id("<unk>")
    for text, found in zip(texts, cuts_of, strict=True):
        enc = tok.encode(text, add_special_tokens=False)
        inside = {
            end
            for (_, end), (start, _) in itertools.pairwise(enc.offsets)
            if end == start and 0 < end < len(text) and not text[end - 1].isspace()
        }
        on, cuts, bounds = on + len(inside & set(found)), cuts + len(inside), bounds + len(found)
        tokens, words = tokens + len(enc.ids), words + len(text.split())
        unk += sum(i == unk_id for i in enc.ids) if unk_id is not None else 0
    return {
        "precision": on / cuts,
        "recall": on / bounds,
        "tokens/eojeol": tokens / words,
        "unk": unk / tokens,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab-size", type=int, default=4000)
    parser.add_argument("--kinds", default="wordpiece,bpe,unigram")
    args = parser.parse_args(argv)
    texts = korean_paragraphs()
    size = sum(len(t.encode()) for t in texts)
    print(f"{len(texts):,} paragraphs, {size / 1e6:.2f} MB; load {os.getloadavg()[0]:.2f}")
    found = analyzers(texts)
    held = [t for i, t in enumerate(texts) if i % 10 == 0]
    held_cuts = [c for i, c in enumerate(found["mecab"]) if i % 10 == 0]
    train = [t for i, t in enumerate(texts) if i % 10]
    print(f"\n{'kind':10} {'trained on':10} {'train s':>8} {'precision':>9} {'recall':>7}"
          f" {'tok/eojeol':>10} {'UNK':>7}")  # fmt: skip
    for kind in args.kinds.split(","):
        for pre in ("words", "morphemes"):
            config = VocabConfig(kind=kind, vocab_size=args.vocab_size, pre_tokenize=pre)
            start = time.perf_counter()
            tok = train_tokenizer(list(train), config)
            seconds = time.perf_counter() - start
            m = agreement(tok, held, held_cuts)
            print(f"{kind:10} {pre:10} {seconds:8.1f} {m['precision']:9.1%} {m['recall']:7.1%}"
                  f" {m['tokens/eojeol']:10.2f} {m['unk']:7.3%}")  # fmt: skip
    print(f"load at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
