"""Tokenize a document store and write training shards (WebDataset tars + manifest.json).

Modes (docs/design.md): nsp (BERT), sop (ALBERT), sso (StructBERT) sentence pairs;
full-sentences and doc-sentences (RoBERTa packing); single (SpanBERT). Without --premask
sequences are stored unmasked and the trainer masks them anew every epoch; with it, each
of --dupe-factor copies is masked once, here, as the original BERT did.

Tip: make --num-shards a multiple of (ranks x loader workers) you plan to train with, so
every worker reads the same number of shards.
"""

from __future__ import annotations

import argparse

from corpus.pairs import SHORT_SEQ_PROB
from corpus.sentences import DEFAULT_LANGUAGE
from pipelines.shard import ShardConfig, run_shard
from schemas.manifest import SHARD_MODES
from schemas.masking import MASK_KINDS

HELP = "docs + tokenizer -> shards"
BEAM = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True, metavar="DIR", help="document store to read")
    p.add_argument("--tokenizer", required=True, metavar="DIR", help="tokenizer dir or vocab.txt")
    p.add_argument("--output", required=True, metavar="DIR", help="shard directory to write")
    add_shard_arguments(p)


def add_shard_arguments(p: argparse.ArgumentParser) -> None:
    """The flags `cloze shard` and `cloze build` share."""
    p.add_argument("--mode", choices=SHARD_MODES, default="full-sentences")
    p.add_argument("--max-seq-len", type=int, default=128, help="tokens per sequence, specials in")
    p.add_argument("--seed", type=int, default=12345, help="same seed, same shards")
    p.add_argument("--block-size", type=int, default=512, help="sequences per tar sample")
    p.add_argument("--num-shards", type=int, help="exact number of shards")
    p.add_argument("--sequences-per-shard", type=int, default=8192)
    p.add_argument(
        "--short-seq-prob",
        type=float,
        default=SHORT_SEQ_PROB,
        help="pair modes: share of chunks given a random, shorter target length",
    )
    p.add_argument(
        "--language", default=DEFAULT_LANGUAGE, help="ISO 639 code for sentence splitting"
    )
    p.add_argument("--premask", choices=MASK_KINDS, help="write statically masked copies")
    p.add_argument("--dupe-factor", type=int, default=1, help="masked copies per sequence")
    p.add_argument(
        "--max-predictions",
        type=int,
        help="cap on masked positions per sequence (default: round(0.15 x max length))",
    )


def config_from_args(
    args: argparse.Namespace, source: str, tokenizer: str, output: str
) -> ShardConfig:
    return ShardConfig(
        input=source,
        tokenizer=tokenizer,
        output=output,
        mode=args.mode,
        max_seq_len=args.max_seq_len,
        seed=args.seed,
        block_size=args.block_size,
        num_shards=args.num_shards,
        sequences_per_shard=args.sequences_per_shard,
        short_seq_prob=args.short_seq_prob,
        language=args.language,
        premask=args.premask,
        dupe_factor=args.dupe_factor,
        max_predictions=args.max_predictions,
    )


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    config = config_from_args(args, args.input, args.tokenizer, args.output)
    manifest = run_shard(config, beam_argv)
    print(
        f"wrote {manifest.sequences} sequences ({manifest.tokens} tokens) in "
        f"{len(manifest.shards)} shards -> {args.output}"
    )
    return 0
