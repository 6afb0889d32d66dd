"""Train a WordPiece (BERT), byte-level BPE (RoBERTa) or Unigram (ALBERT) vocabulary on a
document store and write a Hugging Face tokenizer directory.

Training reads a deterministic sample drawn by Beam (by default at most 1 GB of text; the
same seed and documents always give the same sample, and the same sample a byte-identical
tokenizer.json). About --heldout-docs other documents are held out to measure the result:
UNK rate, tokens per word, characters per token and the share of the vocabulary used go to
vocab_stats.json in the output directory.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from clozeworks.commands import add_progress_flag, progress_wanted
from clozeworks.commands.flags import add_settings, settings_from
from clozeworks.corpus.vocab.sample import SampleSettings
from clozeworks.corpus.vocab.stats import heldout_warnings
from clozeworks.corpus.vocab.train import VocabConfig
from clozeworks.pipelines.vocab import VocabRunConfig, run_vocab

HELP = "docs -> tokenizer directory"
BEAM = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True, metavar="DIR", help="document store to read")
    p.add_argument("--output", required=True, metavar="DIR", help="tokenizer directory to write")
    add_vocab_settings(p)
    add_progress_flag(p, "progress bars for sampling and training")


def add_vocab_settings(p: Any, with_defaults: bool = True) -> None:
    """The vocabulary's and the sample's settings (`cloze build` has them too)."""
    add_settings(p, VocabConfig, with_defaults=with_defaults)
    # The spelling `cloze build` once had for --no-cased.
    p.add_argument(
        "--uncased", dest="cased", action="store_false", default=None, help="as --no-cased"
    )
    add_settings(p, SampleSettings, with_defaults=with_defaults)


def config_from_args(args: argparse.Namespace, **paths: Any) -> VocabRunConfig:
    """The VocabRunConfig the flags describe."""
    return VocabRunConfig(
        vocab=VocabConfig(**settings_from(args, VocabConfig)),
        **settings_from(args, SampleSettings),
        **paths,
    )


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    config = config_from_args(args, input=args.input, output=args.output)
    stats = run_vocab(config, beam_argv, progress_wanted(args))
    sample, held = stats["sample"], stats["heldout"]
    print(
        f"trained a {stats['kind']} vocabulary of {stats['vocab_size']} tokens on "
        f"{sample['documents']} documents ({sample['bytes'] / 1e6:.1f} MB) -> {args.output}"
    )
    if held["tokens"]:
        print(
            f"held out {held['documents']} documents: {held['tokens_per_word']:.3f} tokens "
            f"per word, {held['chars_per_token']:.2f} characters per token, "
            f"UNK rate {held['unk_rate']:.4%}, {held['vocab_used_share']:.1%} of the "
            "vocabulary used"
        )
    for warning in heldout_warnings(held, stats.get("alphabet")):
        print(f"warning: {warning}", file=sys.stderr)
    return 0
