"""Remove duplicate documents from a document store.

Exact duplicates are documents whose text is equal after case folding and whitespace
collapsing. With --near, MinHash over word n-grams finds near-duplicates: documents whose
n-gram Jaccard similarity is --threshold or more. Bands x rows are chosen for the
threshold as text-dedup does, leaning to recall (or set with --bands/--rows), and each
candidate pair's true Jaccard is then checked (unless --no-verify, which merges every
candidate). Duplicates form clusters (connected components, so chains merge); of each
cluster the document with the smallest id is kept. --line-dedup then removes lines that
several documents share from all but one (C4). stats.json counts duplicates, clusters and
lists the largest; --emit-clusters DIR writes (id, cluster) for every clustered document."""

from __future__ import annotations

import argparse

from clozeworks.commands import add_progress_flag, progress_wanted
from clozeworks.pipelines.dedup import DedupConfig, run_dedup
from clozeworks.schemas.errors import UsageError

HELP = "docs -> docs without duplicates"
BEAM = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_progress_flag(p)
    p.add_argument("--input", required=True, metavar="DIR", help="document store to read")
    p.add_argument("--output", required=True, metavar="DIR", help="document store to write")
    p.add_argument(
        "--exact", action=argparse.BooleanOptionalAction, default=True, help="exact dedup"
    )
    p.add_argument(
        "--near", action=argparse.BooleanOptionalAction, default=False, help="MinHash near-dedup"
    )
    near = p.add_argument_group("near-dedup")
    near.add_argument("--threshold", type=float, default=0.8, help="Jaccard threshold (0.8)")
    near.add_argument("--ngram", type=int, default=5, help="words per shingle (5)")
    near.add_argument("--num-perm", type=int, default=256, help="MinHash permutations (256)")
    near.add_argument("--bands", type=int, help="LSH bands (default: optimal for --threshold)")
    near.add_argument("--rows", type=int, help="rows per band (default: optimal)")
    near.add_argument("--seed", type=int, default=42, help="MinHash seed (42)")
    near.add_argument(
        "--fn-weight",
        type=float,
        help="weight of missed pairs when choosing bands x rows; false candidates get "
        "1 - this (0.95 when verifying, 0.8 with --no-verify)",
    )
    near.add_argument(
        "--verify",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep only candidate pairs whose true Jaccard similarity reaches --threshold "
        "(default; --no-verify merges every MinHash candidate)",
    )
    near.add_argument(
        "--cc-rounds",
        type=int,
        default=6,
        help="star rounds per pipeline; more run automatically if needed (6)",
    )
    p.add_argument("--emit-clusters", metavar="DIR", help="write (id, cluster) Parquet here")
    p.add_argument(
        "--line-dedup", action="store_true", help="C4: keep each repeated line in one document"
    )
    p.add_argument(
        "--line-dedup-min-sentences",
        type=int,
        default=3,
        help="drop documents left with fewer sentences by --line-dedup (3, as C4)",
    )


NEAR_FLAGS = (
    "--threshold",
    "--ngram",
    "--num-perm",
    "--bands",
    "--rows",
    "--seed",
    "--fn-weight",
    "--verify",
    "--no-verify",
)


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    ignored = sorted(set(NEAR_FLAGS) & getattr(args, "given_flags", set()))
    if ignored and not args.near:
        verb = "takes" if len(ignored) == 1 else "take"
        raise UsageError(f"{', '.join(ignored)} {verb} effect only with --near")
    config = config_from_args(args)
    stats = run_dedup(config, beam_argv, progress_wanted(args))
    print(
        f"deduplicated {stats['documents_in']} documents: kept {stats['documents_out']}, "
        f"removed {stats['duplicates']} duplicates in {stats['clusters']} clusters "
        f"-> {args.output}"
    )
    return 0


def config_from_args(args: argparse.Namespace) -> DedupConfig:
    """The DedupConfig the flags describe (`cloze build` builds its dedup stage with it)."""
    return DedupConfig(
        input=args.input,
        output=args.output,
        exact=args.exact,
        near=args.near,
        threshold=args.threshold,
        ngram=args.ngram,
        num_perm=args.num_perm,
        bands=args.bands,
        rows=args.rows,
        seed=args.seed,
        fn_weight=args.fn_weight,
        verify=args.verify,
        emit_clusters=args.emit_clusters,
        line_dedup=args.line_dedup,
        line_dedup_min_sentences=args.line_dedup_min_sentences,
        cc_rounds=args.cc_rounds,
    )
