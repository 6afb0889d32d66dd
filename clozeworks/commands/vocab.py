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

from clozeworks.commands import add_progress_flag, progress_wanted
from clozeworks.corpus.vocab.sample import DEFAULT_HELDOUT_DOCS, DEFAULT_SAMPLE_BYTES, parse_size
from clozeworks.corpus.vocab.train import DEFAULT_VOCAB_SIZE, VocabConfig
from clozeworks.pipelines.vocab import VocabRunConfig, run_vocab
from clozeworks.schemas.errors import UsageError
from clozeworks.schemas.special_tokens import VOCAB_KINDS

HELP = "docs -> tokenizer directory"
BEAM = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True, metavar="DIR", help="document store to read")
    p.add_argument("--output", required=True, metavar="DIR", help="tokenizer directory to write")
    p.add_argument(
        "--kind",
        choices=VOCAB_KINDS,
        default="wordpiece",
        help="wordpiece: BERT; bpe: RoBERTa byte-level BPE; unigram: ALBERT/SentencePiece",
    )
    sizes = ", ".join(f"{n} {k}" for k, n in DEFAULT_VOCAB_SIZE.items())
    p.add_argument("--vocab-size", type=int, metavar="N", help=f"default: {sizes}")
    p.add_argument(
        "--min-frequency",
        type=int,
        default=2,
        metavar="N",
        help="wordpiece, bpe: make no merge seen fewer times (default 2)",
    )
    p.add_argument(
        "--limit-alphabet",
        type=int,
        default=1000,
        metavar="N",
        help="wordpiece: keep the N most frequent characters (default 1000)",
    )
    # The same spelling as `cloze build`'s: --cased / --no-cased, --uncased for the second.
    p.add_argument(
        "--cased",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep case; --no-cased lowercases and strips accents (default: no)",
    )
    p.add_argument(
        "--uncased", dest="cased", action="store_false", default=None, help="as --no-cased"
    )
    p.add_argument(
        "--special-tokens",
        default="",
        metavar="T1,T2",
        help="extra special tokens, comma-separated (ids after the five standard ones)",
    )
    p.add_argument(
        "--sentinels",
        type=int,
        default=0,
        metavar="N",
        help="add T5's sentinels <extra_id_0>..<extra_id_N-1> as the last N ids, which span "
        "corruption (--objective t5) needs; T5 used 100 (default 0)",
    )
    p.add_argument("--sample-docs", type=int, metavar="N", help="train on about N documents")
    p.add_argument(
        "--sample-bytes",
        default=str(DEFAULT_SAMPLE_BYTES),
        metavar="SIZE",
        help="train on about this much text, e.g. 500M, 2G; 0 for all (default 1G)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the samples (default 0)")
    p.add_argument(
        "--heldout-docs",
        type=int,
        default=DEFAULT_HELDOUT_DOCS,
        metavar="N",
        help="documents held out to measure the vocabulary (at most 5%% of the store)",
    )
    add_progress_flag(p, "progress bars for sampling and training")


def config_from_args(args: argparse.Namespace) -> VocabRunConfig:
    """The VocabRunConfig the flags describe (`cloze build` builds its vocab stage with it)."""
    if args.sample_docs is not None and args.sample_docs <= 0:
        raise UsageError(f"--sample-docs must be positive (got {args.sample_docs})")
    vocab = VocabConfig(
        kind=args.kind,
        vocab_size=args.vocab_size,
        min_frequency=args.min_frequency,
        limit_alphabet=args.limit_alphabet,
        cased=args.cased,
        extra_special_tokens=tuple(t.strip() for t in args.special_tokens.split(",") if t),
        sentinels=getattr(args, "sentinels", 0),
    )
    config = VocabRunConfig(
        input=args.input,
        output=args.output,
        vocab=vocab,
        sample_docs=args.sample_docs,
        seed=args.seed,
        sample_bytes=parse_size(args.sample_bytes) or None,
        heldout_docs=args.heldout_docs,
        show_progress=progress_wanted(args),
    )
    return config


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    stats = run_vocab(config_from_args(args), beam_argv)
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
    return 0
