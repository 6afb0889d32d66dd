"""Train a WordPiece (BERT), byte-level BPE (RoBERTa) or Unigram (ALBERT) vocabulary on a
document store and write a Hugging Face tokenizer directory."""

from __future__ import annotations

import argparse

from corpus.vocab import VocabConfig
from pipelines.vocab import VocabRunConfig, run_vocab
from schemas.special_tokens import VOCAB_KINDS

HELP = "docs -> tokenizer directory"
BEAM = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True, metavar="DIR", help="document store to read")
    p.add_argument("--output", required=True, metavar="DIR", help="tokenizer directory to write")
    p.add_argument("--kind", choices=VOCAB_KINDS, default="wordpiece")
    p.add_argument(
        "--vocab-size", type=int, help="default: 30522 wordpiece, 50265 bpe, 30000 unigram"
    )
    p.add_argument("--min-frequency", type=int, default=2)
    p.add_argument("--limit-alphabet", type=int, default=1000)
    p.add_argument("--cased", action="store_true", help="keep case (default: lowercase)")
    p.add_argument("--special-tokens", default="", help="extra special tokens, comma-separated")
    p.add_argument("--sample-docs", type=int, help="train on about this many documents")
    p.add_argument("--seed", type=int, default=0, help="seed of the document sample")


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    vocab = VocabConfig(
        kind=args.kind,
        vocab_size=args.vocab_size,
        min_frequency=args.min_frequency,
        limit_alphabet=args.limit_alphabet,
        cased=args.cased,
        extra_special_tokens=tuple(t for t in args.special_tokens.split(",") if t),
    )
    stats = run_vocab(
        VocabRunConfig(args.input, args.output, vocab, args.sample_docs, args.seed), beam_argv
    )
    print(f"trained a {stats['kind']} vocabulary of {stats['vocab_size']} tokens -> {args.output}")
    return 0
