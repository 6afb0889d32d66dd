"""What finding Chinese and Japanese words costs the loader (issue 36, item 4).

    python bench/loader/segmented_words.py

Whole-word, span and n-gram masking of zh and ja shards segment each row's text again
(corpus/shards/words.py). This times `SegmentedWords.starts` on a batch of 256 rows of
512 tokens of real Chinese and Japanese text (the Debian Reference's sections, `apt install
debian-reference-zh-cn debian-reference-ja`) with a 8,000-piece WordPiece trained on them,
on one core.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clean"))

from languages import sections

from clozeworks.corpus.shards.words import segmented_words
from clozeworks.corpus.vocab.train import VocabConfig, train_tokenizer
from clozeworks.schemas.special_tokens import special_tokens_for

ROWS, LENGTH = 256, 512


def main() -> None:
    os.sched_setaffinity(0, {0})
    print(f"load {os.getloadavg()[0]:.2f}\n")
    print("| language | segmenter | seconds per 256 x 512 batch | tokens/s |")
    print("|---|---|---|---|")
    for lang, code in (("zh-cn", "zh"), ("ja", "ja")):
        texts = list(sections(lang).values())
        tok = train_tokenizer(texts, VocabConfig(kind="wordpiece", vocab_size=8000))
        encoded = tok.encode_batch(texts, add_special_tokens=False)
        ids = np.concatenate([np.asarray(e.ids) for e in encoded])
        rows = np.resize(ids, ROWS * LENGTH).reshape(ROWS, LENGTH)
        tokens = [tok.id_to_token(i) for i in range(tok.get_vocab_size())]
        words = segmented_words(code, tokens, special_tokens_for("wordpiece"))
        assert words is not None
        maskable = np.ones_like(rows, dtype=bool)
        words.starts(rows[:2], maskable[:2])  # load the segmenter
        start = time.perf_counter()
        words.starts(rows, maskable)
        seconds = time.perf_counter() - start
        print(f"| {code} | {words.segmenter} | {seconds:.3f} | {ROWS * LENGTH / seconds:,.0f} |")


if __name__ == "__main__":
    main()
