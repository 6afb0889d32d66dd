"""Remove duplicate documents from a document store.

Exact duplicates are found by a hash of the normalized text; of each group the document
with the smallest id is kept.
"""

from __future__ import annotations

import argparse

from pipelines.dedup import DedupConfig, run_dedup

HELP = "docs -> docs without duplicates"
BEAM = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True, metavar="DIR", help="document store to read")
    p.add_argument("--output", required=True, metavar="DIR", help="document store to write")
    p.add_argument(
        "--exact", action=argparse.BooleanOptionalAction, default=True, help="exact dedup"
    )
    p.add_argument(
        "--near", action=argparse.BooleanOptionalAction, default=False, help="MinHash near-dedup"
    )
    p.add_argument("--threshold", type=float, default=0.8, help="near-dedup Jaccard threshold")


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    stats = run_dedup(
        DedupConfig(args.input, args.output, args.exact, args.near, args.threshold), beam_argv
    )
    print(
        f"deduplicated {stats['documents_in']} documents: kept {stats['documents_out']}, "
        f"removed {stats['duplicates']} duplicates -> {args.output}"
    )
    return 0
