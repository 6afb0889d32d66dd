"""Tokens per word and UNK rate per script: cased, uncased as BERT normalizes, and uncased as
clozeworks now does (issue 36, item 1).

    python bench/vocab/scripts.py [--vocab-size 8000]

The text is the manual pages Debian installs in Korean, Japanese, Chinese, Russian and
German (/usr/share/man/{ko,ja,zh_CN,ru,de}) and as many English ones, rendered with `man`,
a page a document. Each variant trains a WordPiece vocabulary on 90% of the pages and is
measured on the other 10% (`by_script` of vocab_stats.json).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
from pathlib import Path

from tokenizers import normalizers

import clozeworks.corpus.vocab.train as train
from clozeworks.corpus.vocab.stats import heldout_stats

LANGUAGES = ("ko", "ja", "zh_CN", "ru", "de")


def render(path: Path) -> str:
    done = subprocess.run(["man", "-l", str(path)], capture_output=True, text=True,
                          env={**os.environ, "MANWIDTH": "100"}, check=False)  # fmt: skip
    return done.stdout


def pages() -> list[str]:
    out = []
    for lang in LANGUAGES:
        out += [render(p) for p in sorted(Path("/usr/share/man", lang).rglob("*.gz"))]
    english = sorted(Path("/usr/share/man/man1").glob("*.gz"))
    out += [render(p) for p in random.Random(0).sample(english, min(len(out), len(english)))]
    return [p for p in out if p.strip()]


def bert_normalizer(lowercase: bool) -> normalizers.Normalizer:
    """BERT's own: NFD and every combining mark dropped when lowercasing, never recomposed."""
    return normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vocab-size", type=int, default=8000)
    args = parser.parse_args()
    docs = pages()
    random.Random(1).shuffle(docs)
    cut = len(docs) * 9 // 10
    fit, held = docs[:cut], docs[cut:]
    print(f"{len(docs)} pages, {sum(map(len, docs)) / 1e6:.1f} M characters; "
          f"trained on {len(fit)}, measured on {len(held)}")  # fmt: skip
    ours = train.wordpiece_normalizer
    rows = {}
    for name, cased, normalizer in (
        ("cased", True, ours),
        ("uncased, BERT's normalizer", False, bert_normalizer),
        ("uncased, clozeworks", False, ours),
    ):
        train.wordpiece_normalizer = normalizer  # what untrained_tokenizer builds
        try:
            config = train.VocabConfig(kind="wordpiece", vocab_size=args.vocab_size, cased=cased)
            tok = train.train_tokenizer(fit, config)
        finally:
            train.wordpiece_normalizer = ours
        rows[name] = heldout_stats(tok, [held], tok.token_to_id("[UNK]")).summary()["by_script"]
    scripts = [s for s, f in rows["cased"].items() if f["words"] >= 200]
    print(f"\n| variant | {' | '.join(scripts)} |")
    print(f"|---|{'---|' * len(scripts)}")
    for name, by_script in rows.items():
        cells = [
            f"{by_script[s]['tokens_per_word']:.2f} / {100 * by_script[s]['unk_rate']:.2f}%"
            for s in scripts
        ]
        print(f"| {name} | {' | '.join(cells)} |")
    print("\n(tokens per word / UNK rate; words per script:",
          ", ".join(f"{s} {rows['cased'][s]['words']}" for s in scripts) + ")")  # fmt: skip


if __name__ == "__main__":
    main()
