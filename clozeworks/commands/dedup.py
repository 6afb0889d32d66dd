"""Remove duplicate documents from a document store.

Exact duplicates are documents whose text is equal after case folding and whitespace
collapsing. With --near, MinHash over word n-grams finds near-duplicates: documents whose
n-gram Jaccard similarity is --threshold or more. Bands x rows are chosen for the
threshold as text-dedup does, leaning to recall (or set with --bands/--rows), and each
candidate pair's true Jaccard is then checked (unless --no-verify, which merges every
candidate). Duplicates form clusters (connected components, so chains merge); of each
cluster the document with the smallest id is kept. --line-dedup then removes lines that
several documents share from all but one (C4). .stats.json counts duplicates, clusters and
lists the largest; --emit-clusters DIR writes (id, cluster) for every clustered document."""

from __future__ import annotations

import argparse

from clozeworks.commands import add_progress_flag, progress_wanted
from clozeworks.commands.flags import add_settings, settings_from
from clozeworks.pipelines.dedup import DedupConfig, DedupSettings, run_dedup
from clozeworks.schemas.errors import UsageError
from clozeworks.schemas.settings import settings_of

HELP = "docs -> docs without duplicates"
BEAM = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_progress_flag(p)
    p.add_argument(
        "--input",
        nargs="+",
        action="extend",
        required=True,
        metavar="DIR",
        help="document stores to read (several are deduplicated as one)",
    )
    p.add_argument("--output", required=True, metavar="DIR", help="document store to write")
    p.add_argument("--emit-clusters", metavar="DIR", help="write (id, cluster) Parquet here")
    add_settings(p, DedupSettings)


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    near_flags = {
        flag
        for s in settings_of(DedupSettings)
        if s.name in DedupSettings.NEAR_ONLY
        for flag in (s.flag, s.flag.replace("--", "--no-", 1) if s.kind is bool else s.flag)
    }
    ignored = sorted(near_flags & getattr(args, "given_flags", set()))
    if ignored and not args.near:
        verb = "takes" if len(ignored) == 1 else "take"
        raise UsageError(f"{', '.join(ignored)} {verb} effect only with --near")
    config = DedupConfig(
        inputs=args.input,
        output=args.output,
        emit_clusters=args.emit_clusters,
        **settings_from(args, DedupSettings),
    )
    stats = run_dedup(config, beam_argv, progress_wanted(args))
    print(
        f"deduplicated {stats['documents_in']} documents: kept {stats['documents_out']}, "
        f"removed {stats['duplicates']} duplicates in {stats['clusters']} clusters "
        f"-> {args.output}"
    )
    return 0
