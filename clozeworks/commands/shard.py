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
from typing import Any

from clozeworks.commands import add_progress_flag, progress_wanted
from clozeworks.corpus.shards.instances import PACKING_RULES
from clozeworks.corpus.shards.pairs import PAIR_RULES, SHORT_SEQ_PROB
from clozeworks.corpus.text.sentences import DEFAULT_LANGUAGE
from clozeworks.pipelines.shard import ShardConfig, run_shard
from clozeworks.schemas.kinds import MASK_KINDS, SHARD_MODES

HELP = "docs + tokenizer -> shards"
BEAM = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_progress_flag(p)
    p.add_argument("--input", required=True, metavar="DIR", help="document store to read")
    p.add_argument("--tokenizer", required=True, metavar="DIR", help="tokenizer dir or vocab.txt")
    p.add_argument("--output", required=True, metavar="DIR", help="shard directory to write")
    add_shard_arguments(p)


def add_shard_arguments(p: Any, with_defaults: bool = True) -> None:
    """The flags `cloze shard` and `cloze build` share. `with_defaults=False` leaves every
    default None (build tells a flag given from one not given, to let its TOML file fill
    in), and says the default in the help instead."""

    def add(flag: str, default: Any, help_: str, **kw: Any) -> None:
        if with_defaults:
            p.add_argument(flag, default=default, help=help_, **kw)
        else:
            shown = f" (default: {default})" if default is not None else ""
            p.add_argument(flag, default=None, help=help_ + shown, **kw)

    add("--mode", "full-sentences", "what a sequence is (docs/design.md)", choices=SHARD_MODES)
    add("--max-seq-len", 128, "tokens per sequence, specials in", type=int)
    add("--seed", 12345, "same seed, same shards", type=int)
    add("--block-size", 512, "sequences per tar sample", type=int)
    add("--num-shards", None, "exact number of shards", type=int)
    add("--sequences-per-shard", 8192, "shard size when --num-shards is not given", type=int)
    add(
        "--short-seq-prob",
        SHORT_SEQ_PROB,
        "pair modes: share of chunks given a random, shorter target length",
        type=float,
    )
    add(
        "--pair-rules",
        "clozeworks",
        "pair modes: 'reference' makes every one-sentence chunk a random pair and keeps "
        "over-long sentences whole, as BERT's and ALBERT's create_pretraining_data.py do "
        "(docs/design.md, where we differ from the reference)",
        choices=PAIR_RULES,
    )
    add(
        "--packing-rules",
        "clozeworks",
        "full-sentences, doc-sentences: 'reference' leaves out a sentence longer than a "
        "sequence, as fairseq's packing for RoBERTa does; by default it is cut into pieces",
        choices=PACKING_RULES,
    )
    add("--language", DEFAULT_LANGUAGE, "ISO 639 code for sentence splitting")
    add("--premask", None, "write statically masked copies", choices=MASK_KINDS)
    add("--dupe-factor", 1, "masked copies per sequence (needs --premask)", type=int)
    add(
        "--max-predictions",
        None,
        "cap on masked positions per sequence (default: round(0.15 x max length))",
        type=int,
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
        pair_rules=args.pair_rules,
        packing_rules=args.packing_rules,
        language=args.language,
        premask=args.premask,
        dupe_factor=args.dupe_factor,
        max_predictions=args.max_predictions,
    )


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    config = config_from_args(args, args.input, args.tokenizer, args.output)
    manifest = run_shard(config, beam_argv, progress_wanted(args))
    print(
        f"wrote {manifest.sequences} sequences ({manifest.tokens} tokens) in "
        f"{len(manifest.shards)} shards -> {args.output}"
    )
    return 0
