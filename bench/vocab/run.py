"""bench/vocab: `cloze vocab` (Beam sample -> streamed training -> held-out stats -> HF
directory) against calling `tokenizers`' `train_from_iterator` directly on the same sample.

    .venv/bin/python bench/vocab/run.py [--work DIR] [--kinds wordpiece,bpe,unigram]

The corpus is 35 MB of realistic documents (bench/scale/corpus.py: paragraphs of Python's
reST docs, Debian copyright files and man pages, several KB per document; nothing is
downloaded), cleaned once into a document store under --work. For each kind, two child processes run
one after the other, each reporting its own wall time and peak RSS:

- ours: `pipelines.vocab.run_vocab` from the document store, end to end;
- peer: the same sample (same seed and rates, selected here outside the timer) held in
  memory as a list of documents, then `Tokenizer.train_from_iterator` with the stock
  trainer of that kind. Only the training call is timed.

Ratios come from one run on one machine; absolute seconds from different runs do not
compare (this machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

KINDS = ("wordpiece", "bpe", "unigram")
STEPS = ("sample", "train", "measure", "write")


def build_corpus(work: Path, megabytes: float = 35.0) -> str:
    """Realistic documents (bench/scale/corpus.py) as a document store under `work` (built
    once, then reused)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench.scale.corpus import write_corpus
    from clozeworks.pipelines.clean import CleanConfig, run_clean

    docs = work / "docs"
    if (docs / ".stats.json").is_file():
        return str(docs)
    raw = work / "raw" / "docs.jsonl"
    write_corpus(raw, megabytes)
    run_clean(CleanConfig(inputs=[str(raw)], output=str(docs), id_field="id"))
    return str(docs)


def replicate(docs: str, copies: int) -> str:
    """A store of `copies` copies of `docs` (ids made unique), to see how costs scale:
    training on repeated text grows only its counting phase, so this is the pessimistic
    case for our overhead."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    if copies <= 1:
        return docs
    out = Path(f"{docs}-x{copies}")
    if (out / ".stats.json").is_file():
        return str(out)
    out.mkdir(exist_ok=True)
    table = pq.read_table(next(Path(docs).glob("*.parquet")))
    for k in range(copies):
        ids = pa.array([f"{i}#copy{k}" for i in table.column("id").to_pylist()])
        copy = table.set_column(table.schema.get_field_index("id"), "id", ids)
        pq.write_table(copy, out / f"part-{k:05d}-of-{copies:05d}.parquet")
    shutil.copyfile(Path(docs) / ".stats.json", out / ".stats.json")
    return str(out)


def child_ours(docs: str, out: str, kind: str, vocab_size: int | None, sample: int) -> dict:
    from clozeworks.corpus.vocab.train import VocabConfig
    from clozeworks.pipelines.vocab import VocabRunConfig, run_vocab

    config = VocabRunConfig(
        input=docs,
        output=out,
        vocab=VocabConfig(kind=kind, vocab_size=vocab_size),
        sample_bytes=sample or None,
    )
    start = time.perf_counter()
    stats = run_vocab(config)
    return {
        "seconds": time.perf_counter() - start,
        "steps": stats["seconds"],
        "documents": stats["sample"]["documents"],
        "bytes": stats["sample"]["bytes"],
        "tokens": _tokens(Path(out) / "tokenizer.json"),
    }


def child_peer(docs: str, out: str, kind: str, vocab_size: int | None, sample: int) -> dict:
    import pyarrow.parquet as pq
    from tokenizers import pre_tokenizers, trainers

    from clozeworks.corpus.vocab.sample import SampleSettings
    from clozeworks.corpus.vocab.train import VocabConfig, untrained_tokenizer
    from clozeworks.pipelines.vocab import store_totals
    from clozeworks.schemas.special_tokens import special_tokens_for

    config = VocabConfig(kind=kind, vocab_size=vocab_size)
    # The settings ours gets (child_ours), so both draw the same sample.
    rates = SampleSettings(sample_bytes=sample or None).rates(*store_totals(docs))
    texts: list[str] = []
    for part in sorted(Path(docs).glob("*.parquet")):
        table = pq.read_table(part, columns=["id", "text"])
        train, _ = rates.masks(table.column("id").to_pylist())
        texts.extend(table.filter(train).column("text").to_pylist())
    tok = untrained_tokenizer(config)  # the same normalizer and pre-tokenizer as ours
    specials = list(special_tokens_for(kind).order)
    trainer: Any
    if kind == "wordpiece":
        trainer = trainers.WordPieceTrainer(
            vocab_size=config.size,
            min_frequency=config.min_frequency,
            limit_alphabet=config.limit_alphabet,
            special_tokens=specials,
            continuing_subword_prefix="##",
            show_progress=False,
        )
    elif kind == "bpe":
        trainer = trainers.BpeTrainer(
            vocab_size=config.size,
            min_frequency=config.min_frequency,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
    else:
        trainer = trainers.UnigramTrainer(
            vocab_size=config.size, special_tokens=specials, unk_token="<unk>", show_progress=False
        )
    start = time.perf_counter()
    tok.train_from_iterator(texts, trainer=trainer)
    seconds = time.perf_counter() - start
    tok.save(out)
    return {
        "seconds": seconds,
        "documents": len(texts),
        "bytes": sum(len(t.encode("utf-8")) for t in texts),
        "tokens": _tokens(Path(out)),
    }


def _tokens(path: Path) -> list[str]:
    vocab = json.loads(path.read_text(encoding="utf-8"))["model"]["vocab"]
    return sorted(vocab) if isinstance(vocab, dict) else sorted(p for p, _ in vocab)


def run_child(role: str, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", role, *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{role} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--work", default="/tmp/cloze-bench-vocab", help="corpus and outputs")
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--vocab-size", type=int, help="default: each kind's paper size")
    p.add_argument(
        "--sample-bytes", type=int, default=0, help="train on about this much text (0: all)"
    )
    p.add_argument("--copies", type=int, default=1, help="train on N copies of the corpus")
    p.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        role, docs, out, kind, size, sample = args.child
        fn = child_ours if role == "ours" else child_peer
        result = fn(docs, out, kind, int(size) or None, int(sample))
        result["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(result))
        return 0
    work = Path(args.work)
    docs = replicate(build_corpus(work), args.copies)
    rows = []
    for kind in args.kinds.split(","):
        common = (docs, kind, str(args.vocab_size or 0), str(args.sample_bytes))
        ours = run_child("ours", common[0], str(work / f"ours-{kind}"), *common[1:])
        peer = run_child("peer", common[0], str(work / f"peer-{kind}.json"), *common[1:])
        assert ours["documents"] == peer["documents"], "both must train on the same sample"
        a, b = set(ours["tokens"]), set(peer["tokens"])
        rows.append((kind, ours, peer, len(a & b) / len(a | b)))
    print(
        f"\nsample: {rows[0][1]['documents']} documents, {rows[0][1]['bytes'] / 1e6:.1f} MB; "
        "one run, ratios only (the machine may be shared)\n"
    )
    print(
        "| kind | ours s (sample / train / measure / write) | train_from_iterator s | "
        "overhead | ours peak MB | peer peak MB | same tokens |"
    )
    print("|---|---|---|---|---|---|---|")
    for kind, ours, peer, overlap in rows:
        steps = " / ".join(f"{ours['steps'][k]:.1f}" for k in STEPS)
        print(
            f"| {kind} | {ours['seconds']:.1f} ({steps}) | {peer['seconds']:.1f} | "
            f"{ours['seconds'] / peer['seconds'] - 1:+.0%} | {ours['peak_mb']:.0f} | "
            f"{peer['peak_mb']:.0f} | {overlap:.1%} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
