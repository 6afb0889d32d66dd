"""Fine-tuning inputs (issue 39, item 1): `cloze finetune`'s encoding of a sentence-pair task
and of a token task, with the fastest exact encoder (trainer/finetune/template.py) and with
`tokenizers`' `encode_batch` as before, beside transformers' fast tokenizer called as a
`Trainer` user calls it (`tokenizer(a, b, truncation=True, max_length=128)`).

    .venv/bin/python bench/finetune/encode.py [--megabytes 8] [--kind wordpiece]

Text: realistic documents (bench/corpus.py: Python's reST docs, Debian copyright files, man
pages); each paragraph paired with the next (an MNLI-sized pair is ~60 words, these are
longer), and, for the token task, split on whitespace into sentences of 40 words. The
vocabulary is `cloze vocab`'s (16,000 pieces) trained on the same text. One process, both
cores for `tokenizers`' own threads; seconds are the best of three. Identity of ids, token
types and cut counts is checked on every run.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.corpus import realistic_texts  # noqa: E402


def _best(run, repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = run()
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=float, default=8.0)
    parser.add_argument("--kind", default="wordpiece", choices=["wordpiece", "bpe", "unigram"])
    parser.add_argument("--max-len", type=int, default=128)
    args = parser.parse_args()

    import tempfile

    from transformers import PreTrainedTokenizerFast

    from clozeworks.corpus.vocab.fast import encoder_for
    from clozeworks.corpus.vocab.train import VocabConfig, train_tokenizer
    from clozeworks.trainer.finetune import encoded, tokens
    from clozeworks.trainer.finetune.readers import Example

    texts = realistic_texts(args.megabytes)
    tok = train_tokenizer(texts, VocabConfig(vocab_size=16000, kind=args.kind))
    paragraphs = [p for t in texts for p in t.split("\n\n") if p.strip()]
    examples = [Example(a, b, 0.0, i) for i, (a, b) in enumerate(itertools.pairwise(paragraphs))]
    words = [w for p in paragraphs for w in p.split()]
    sentences = [
        tokens.Sentence(words[i : i + 40], [0] * len(words[i : i + 40]), i)
        for i in range(0, len(words), 40)
    ]
    megabytes = sum(len(e.text_a.encode()) + len(e.text_b.encode()) for e in examples) / 1e6
    encoder_for(tok)(paragraphs[:10])  # the choice is made once per process; not timed
    with tempfile.TemporaryDirectory() as work:
        tok.save(os.path.join(work, "tokenizer.json"))
        hf = PreTrainedTokenizerFast(tokenizer_file=os.path.join(work, "tokenizer.json"))
    a_texts = [e.text_a for e in examples]
    b_texts = [e.text_b for e in examples]
    n = args.max_len

    def ours():
        return encoded.encode(tok, examples, n)

    def before():
        return encoded._encode_with_tokenizers(encoded.plain_copy(tok), examples, n, ours_.labels)

    def transformers_call():
        return hf(a_texts, b_texts, truncation=True, max_length=n)

    t_ours, ours_ = _best(ours)
    t_before, before_ = _best(before)
    t_hf, hf_ = _best(transformers_call)
    assert ours_.ids == before_.ids and ours_.types == before_.types  # type: ignore[union-attr]
    assert ours_.truncated == before_.truncated  # type: ignore[union-attr]
    assert ours_.ids == hf_["input_ids"]  # type: ignore[index,union-attr]

    t_words, words_ = _best(lambda: tokens.encode_sentences(tok, sentences, n))
    t_words_before, words_before = _best(
        lambda: tokens._encode_with_tokenizers(encoded.plain_copy(tok), sentences, n)
    )
    assert words_.ids == words_before.ids  # type: ignore[union-attr]
    assert words_.first_pieces == words_before.first_pieces  # type: ignore[union-attr]
    word_mb = sum(len(w.encode()) + 1 for w in words) / 1e6

    print(f"{args.kind}, max length {n}; load average {os.getloadavg()[0]:.2f}")
    print(f"pairs: {len(examples)} examples, {megabytes:.1f} MB")
    print("| encoder | s | MB/s | vs ours |")
    print("|---|---:|---:|---:|")
    for name, t in (
        ("`cloze finetune` (fast encoder + template)", t_ours),
        ("`tokenizers` `encode_batch` (before)", t_before),
        ("transformers `tokenizer(a, b)`", t_hf),
    ):
        print(f"| {name} | {t:.2f} | {megabytes / t:.1f} | {t / t_ours:.2f}x slower |")
    print(f"token task: {len(sentences)} sentences of 40 words, {word_mb:.1f} MB")
    print(f"| `cloze finetune` | {t_words:.2f} | {word_mb / t_words:.1f} | |")
    print(
        f"| `tokenizers` pre-split (before) | {t_words_before:.2f} | "
        f"{word_mb / t_words_before:.1f} | {t_words_before / t_words:.2f}x slower |"
    )


if __name__ == "__main__":
    main()
