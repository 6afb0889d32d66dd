"""RoBERTa's packing on real documents: fairseq's blocks, ours, and how ours used to be.

    .venv/bin/python bench/fidelity/packing.py --docs STORE --tokenizer DIR [--documents 20000]

Tokenizes the first documents of a `cloze clean`/`dedup` store (sentences as `cloze shard`
splits them) and packs them at 128 and 512 tokens four ways: fairseq's `complete` (the
line-for-line copy in tests/corpus/shards/test_packing_reference.py, over-long blocks
dropped as its training refuses them), ours (`pack_stream`, over-long sentences cut),
ours with `--packing-rules reference`, and the packing before 2026-11-24 (each document's
chunks alone, then the short last chunks packed together whole). Prints sequences, mean
content length, the share shorter than 0.9 of the maximum, the share of document tokens
the sequences hold, and the sentences longer than a sequence.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from clozeworks.corpus.shards.instances import pack_sentences, pack_stream  # noqa: E402
from clozeworks.corpus.shards.tokenize import DocumentEncoder  # noqa: E402
from clozeworks.corpus.vocab.train import load_tokenizer  # noqa: E402
from tests.corpus.shards.test_packing_reference import fairseq_slices  # noqa: E402


def read_texts(store: Path, n: int) -> list[str]:
    texts: list[str] = []
    for part in sorted(store.glob("part-*.parquet")):
        texts += pq.read_table(part, columns=["text"]).column("text").to_pylist()
        if len(texts) >= n:
            break
    return texts[:n]


def before(docs: list[list[int]], capacity: int) -> list[int]:
    """The old FULL-SENTENCES: each document's chunks alone; its short last chunk packed
    with other documents' whole, a separator between them."""
    lengths, tails = [], []
    for doc in docs:
        ends = pack_sentences(doc, capacity)
        sizes = np.diff([0, *ends]).tolist()
        if sizes and sizes[-1] < capacity:
            tails.append(sizes.pop())
        lengths += sizes
    used = -1
    for size in tails:
        if used >= 0 and used + 1 + size <= capacity:
            used += 1 + size
        else:
            if used >= 0:
                lengths.append(used)
            used = size
    return lengths + ([used] if used >= 0 else [])


def row(name: str, lengths, capacity: int, tokens: int, held: int) -> str:
    lengths = np.asarray(lengths)
    return (
        f"| {capacity + 2} | {name} | {len(lengths):,} | {lengths.mean():.1f} | "
        f"{(lengths < 0.9 * capacity).mean():.1%} | {held / tokens:.2%} |"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--docs", type=Path, required=True, help="a document store")
    p.add_argument("--tokenizer", type=Path, required=True, help="a `cloze vocab` directory")
    p.add_argument("--documents", type=int, default=20000)
    args = p.parse_args()
    encoder = DocumentEncoder(load_tokenizer(args.tokenizer).tokenizer)
    texts = read_texts(args.docs, args.documents)
    batch = encoder.encode(texts)
    per_doc = [
        np.diff(batch.sentences[batch.documents[d] : batch.documents[d + 1] + 1]).tolist()
        for d in range(len(batch))
    ]
    docs = [d for d in per_doc if d]
    tokens = int(batch.sentences[-1])
    print(f"{len(docs):,} documents, {tokens:,} tokens, {len(batch.sentences) - 1:,} sentences")
    print("| max length | packing | sequences | mean content | < 0.9 max | tokens held |")
    print("|---|---|---|---|---|---|")
    for capacity in (126, 510):
        sizes: list[int] = []
        for doc in docs:
            sizes += ([1] if sizes else []) + doc
        blocks = np.diff(np.array(fairseq_slices(sizes, "complete", capacity, 1)), axis=1)[:, 0]
        kept = blocks[blocks <= capacity]
        separators = len(docs) - 1
        print(row("fairseq complete", kept, capacity, tokens, kept.sum() - separators))
        for name, cut in (("ours", True), ("ours, --packing-rules reference", False)):
            stream, lo, hi = pack_stream(batch, capacity, sep=-1, cut=cut)
            held = sum(int((stream[a:b] != -1).sum()) for a, b in zip(lo, hi, strict=True))
            print(row(name, hi - lo, capacity, tokens, held))
        print(row("before (tails packed whole)", before(docs, capacity), capacity, tokens, tokens))
        long = sum(s > capacity for d in docs for s in d)
        print(f"sentences longer than {capacity}: {long:,}")


if __name__ == "__main__":
    main()
