"""What the sentence-splitting fix (issue 38) changes in shards: the same documents sharded
with the splitter before the fix and after it, in one run.

    .venv/bin/python bench/shard/sentence_effect.py [--docs 3000]

Corpora: the demo's (the stdlib's docstrings through `cloze build`'s clean, dedup and vocab
with the demo's settings) and bench/scale's real documents (a WordPiece vocabulary of 8,000
trained here). "Before" runs the same pipeline with bench/shard/sentence_words.py's copy of
the old rule in place of `split_sentences`; the local runner runs in this process, so the
swap reaches the pipeline. Per mode: sequences, tokens and shard bytes before and after,
sequences of either side that the other does not hold, and the reference-fidelity figures:
the share of sequences shorter than the maximum and the mean length.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tokenizers import BertWordPieceTokenizer

from bench.scale.corpus import documents
from bench.shard.sentence_words import edge_rule
from clozeworks.corpus.shards import tokenize
from clozeworks.corpus.shards.blocks import iter_blocks
from clozeworks.corpus.shards.settings import ShardSettings
from clozeworks.corpus.text.demo import write_demo_corpus
from clozeworks.corpus.vocab.train import VocabConfig
from clozeworks.pipelines.build import BuildConfig, run_build
from clozeworks.pipelines.clean import CleanSettings
from clozeworks.pipelines.shard import ShardConfig, run_shard
from clozeworks.schemas.documents import DOCUMENT
from clozeworks.schemas.manifest import read_manifest


def demo_store(root: Path) -> tuple[str, str]:
    raw = root / "raw" / "docstrings.jsonl.gz"
    write_demo_corpus(raw)
    paths, _ = run_build(
        BuildConfig(
            inputs=[str(raw.parent)],
            root=str(root),
            clean=CleanSettings(id_field="id"),
            vocab=VocabConfig(kind="wordpiece", vocab_size=8000),
            shard=ShardSettings(mode="full-sentences", max_seq_len=128, sequences_per_shard=2048),
        ),
        report=lambda _: None,
    )
    return paths.docs, paths.tokenizer


def scale_store(root: Path, count: int) -> tuple[str, str]:
    texts = list(itertools.islice(documents(0), count))
    docs = root / "docs"
    docs.mkdir(parents=True)
    rows = [{"id": f"doc-{i:09d}", "text": t, "source": "scale", "meta": "{}"} for i, t in
            enumerate(texts)]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows, DOCUMENT), docs / "part-00000-of-00001.parquet")
    (docs / ".stats.json").write_text(json.dumps({"documents_out": len(rows)}))
    tok = BertWordPieceTokenizer(lowercase=True)
    tok.train_from_iterator(texts, vocab_size=8000, show_progress=False)
    (root / "tokenizer").mkdir()
    tok.save_model(str(root / "tokenizer"))
    return str(docs), str(root / "tokenizer")


def sequences(directory: Path) -> tuple[Counter[bytes], int, int, float, float]:
    """(sequences as bytes with their pair label/segment, tokens, shard bytes, share shorter
    than the maximum, mean length)."""
    manifest = read_manifest(directory)
    seqs: Counter[bytes] = Counter()
    lengths = []
    for shard in manifest.shards:
        for _, block in iter_blocks(directory / shard.name):
            for i in range(len(block)):
                seq = block.sequence(i).astype(np.int64)
                extra = (
                    b""
                    if block.labels is None
                    else bytes([int(block.labels[i]), int(block.segments[i]) % 256])
                )
                seqs[seq.tobytes() + extra] += 1
                lengths.append(len(seq))
    size = sum(s.bytes for s in manifest.shards)
    arr = np.array(lengths)
    return seqs, int(arr.sum()), size, float((arr < manifest.max_seq_len).mean()), arr.mean()


def shard(docs: str, tokenizer: str, out: Path, mode: str, old: bool) -> Path:
    tokenize.split_sentences = edge_rule if old else NEW_RULE
    run_shard(
        ShardConfig(
            input=docs,
            tokenizer=tokenizer,
            output=str(out),
            mode=mode,
            max_seq_len=128,
            sequences_per_shard=2048,
        )
    )
    tokenize.split_sentences = NEW_RULE
    return out


NEW_RULE = tokenize.split_sentences


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=3000, help="bench/scale documents")
    args = parser.parse_args()
    print(
        "| corpus | mode | sequences before / after | changed (in after, not before) "
        "| tokens before / after | shard bytes before / after | short share before / after "
        "| mean length before / after |"
    )
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(dir="bench/out" if Path("bench/out").is_dir() else None) as t:
        tmp = Path(t)
        corpora = {
            "demo": (demo_store(tmp / "demo"), ("full-sentences", "nsp")),
            f"bench/scale {args.docs:,} docs": (
                scale_store(tmp / "scale", args.docs),
                ("nsp", "sop", "sso", "full-sentences", "doc-sentences"),
            ),
        }
        for name, ((docs, tokenizer), modes) in corpora.items():
            for mode in modes:
                before = sequences(shard(docs, tokenizer, tmp / name / mode / "old", mode, True))
                after = sequences(shard(docs, tokenizer, tmp / name / mode / "new", mode, False))
                changed = sum((after[0] - before[0]).values())
                print(
                    f"| {name} | {mode} | {before[0].total():,} / {after[0].total():,} "
                    f"| {changed:,} ({changed / after[0].total():.2%}) "
                    f"| {before[1]:,} / {after[1]:,} | {before[2]:,} / {after[2]:,} "
                    f"| {before[3]:.2%} / {after[3]:.2%} | {before[4]:.1f} / {after[4]:.1f} |"
                )


if __name__ == "__main__":
    main()
