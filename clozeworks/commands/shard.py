"""Tokenize a document store and write training shards (WebDataset tars + .manifest.json).

Modes (docs/design.md): nsp (BERT), sop (ALBERT), sso (StructBERT) sentence pairs;
full-sentences and doc-sentences (RoBERTa packing); single (SpanBERT). Without --premask
sequences are stored unmasked and the trainer masks them anew every epoch; with it, each
of --dupe-factor copies is masked once, here, as the original BERT did.

Tip: make --num-shards a multiple of (ranks x loader workers) you plan to train with, so
every worker reads the same number of shards.
"""

from __future__ import annotations

import argparse

from clozeworks.commands import add_progress_flag, progress_wanted
from clozeworks.commands.flags import add_settings, settings_from
from clozeworks.corpus.shards.settings import ShardSettings
from clozeworks.pipelines.shard import ShardConfig, run_shard

HELP = "docs + tokenizer -> shards"
BEAM = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_progress_flag(p)
    p.add_argument("--input", required=True, metavar="DIR", help="document store to read")
    p.add_argument("--tokenizer", required=True, metavar="DIR", help="tokenizer dir or vocab.txt")
    p.add_argument("--output", required=True, metavar="DIR", help="shard directory to write")
    add_settings(p, ShardSettings)


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    config = ShardConfig(
        input=args.input,
        tokenizer=args.tokenizer,
        output=args.output,
        **settings_from(args, ShardSettings),
    )
    manifest = run_shard(config, beam_argv, progress_wanted(args))
    print(
        f"wrote {manifest.sequences} sequences ({manifest.tokens} tokens) in "
        f"{len(manifest.shards)} shards -> {args.output}"
    )
    return 0
