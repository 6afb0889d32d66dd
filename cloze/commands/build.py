"""Run the whole corpus build: clean -> dedup -> vocab -> shard, into ROOT/clean, ROOT/docs,
ROOT/tokenizer and ROOT/shards."""

from __future__ import annotations

import argparse

from corpus.vocab import VocabConfig
from pipelines.build import BuildConfig, run_build
from schemas.manifest import SHARD_MODES
from schemas.special_tokens import VOCAB_KINDS

HELP = "raw files -> docs, tokenizer and shards in one go"
BEAM = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", nargs="+", required=True, metavar="PATH")
    p.add_argument("--output", required=True, metavar="DIR", help="root of the build")
    p.add_argument("--kind", choices=VOCAB_KINDS, default="wordpiece", help="vocabulary kind")
    p.add_argument("--vocab-size", type=int)
    p.add_argument("--mode", choices=SHARD_MODES, default="full-sentences")
    p.add_argument("--max-seq-len", type=int, default=128)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--sequences-per-shard", type=int, default=8192)


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    config = BuildConfig(
        inputs=args.input,
        root=args.output,
        vocab=VocabConfig(kind=args.kind, vocab_size=args.vocab_size),
        mode=args.mode,
        max_seq_len=args.max_seq_len,
        seed=args.seed,
        sequences_per_shard=args.sequences_per_shard,
    )
    run_build(config, beam_argv)
    return 0
