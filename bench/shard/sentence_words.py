"""Do sentences keep a document's words? The rule before issue 38 (boundaries judged from the
pieces' edges) against ours (cuts at positions in the original text), on real documents.

    .venv/bin/python bench/shard/sentence_words.py [--docs 3000]

Corpora: whole files (Python's reST sources from python3.11-doc, Debian copyright files,
man pages rendered by bench/scale/corpus.py's roff stripper) and bench/scale's documents
(4-16 real paragraphs joined by blank lines). For each rule: documents whose words change
(`" ".join(sentences).split() != text.split()`), and over all documents the token ids whose
counts differ between encoding each sentence alone and encoding the document whole (a
WordPiece vocabulary trained here on the same text: its pre-tokenizer splits at whitespace,
so the two agree exactly when no cut falls inside a word).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import sentencex
from tokenizers import BertWordPieceTokenizer

from bench.scale.corpus import SOURCES, _read, documents
from clozeworks.corpus.text.sentences import split_sentences


def edge_rule(text: str, language: str = "en") -> list[str]:
    """The splitter before issue 38, verbatim: a boundary is dropped when neither piece has
    whitespace at its edge, which sentencex's dropped whitespace makes wrong."""
    out: list[str] = []
    current = ""
    for piece in sentencex.segment(language, text):
        if current and piece and not current[-1].isspace() and not piece[0].isspace():
            current += piece
            continue
        stripped = current.strip()
        if stripped:
            out.append(stripped)
        current = piece
    stripped = current.strip()
    if stripped:
        out.append(stripped)
    return out


def whole_files(limit: int) -> dict[str, list[str]]:
    out = {}
    for (root, pattern), name in zip(SOURCES, ("reST", "copyright", "man"), strict=True):
        paths = sorted(p for p in Path(root).glob(pattern) if p.is_file())[:limit]
        out[name] = [t for t in map(_read, paths) if t.strip()]
    return out


def measure(
    texts: list[str], split: Callable[[str], list[str]], tok
) -> tuple[int, int, int, float]:
    """(documents with changed words, token ids whose counts differ, tokens, seconds spent
    splitting)."""
    started = time.perf_counter()
    for text in texts:
        split(text)
    seconds = time.perf_counter() - started
    changed = 0
    by_sentence: Counter[int] = Counter()
    whole: Counter[int] = Counter()
    for text in texts:
        sentences = split(text)
        changed += " ".join(sentences).split() != text.split()
        for enc in tok.encode_batch(sentences, add_special_tokens=False):
            by_sentence.update(enc.ids)
        whole.update(tok.encode(text, add_special_tokens=False).ids)
    differ = sum(1 for i in by_sentence.keys() | whole.keys() if by_sentence[i] != whole[i])
    return changed, differ, sum(whole.values()), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=3000, help="bench/scale documents")
    parser.add_argument("--files", type=int, default=1000, help="whole files per source")
    args = parser.parse_args()
    corpora = whole_files(args.files)
    corpora["bench/scale documents"] = list(itertools.islice(documents(0), args.docs))
    everything = [t for texts in corpora.values() for t in texts]
    tok = BertWordPieceTokenizer(lowercase=True)
    tok.train_from_iterator(everything, vocab_size=8000, show_progress=False)
    print(
        "| corpus | documents | MB | before: changed docs | after | before: ids differing "
        "| after | tokens | split s before / after |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, texts in corpora.items():
        mb = sum(len(t.encode()) for t in texts) / 1e6
        b_docs, b_ids, tokens, b_s = measure(texts, edge_rule, tok)
        a_docs, a_ids, _, a_s = measure(texts, split_sentences, tok)
        print(
            f"| {name} | {len(texts):,} | {mb:.1f} | {b_docs:,} ({b_docs / len(texts):.1%}) "
            f"| {a_docs:,} | {b_ids:,} | {a_ids:,} | {tokens:,} | {b_s:.2f} / {a_s:.2f} |"
        )


if __name__ == "__main__":
    main()
