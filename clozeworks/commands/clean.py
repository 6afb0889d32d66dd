"""Read raw text files, normalize and filter them, and write a document store.

Inputs are files, directories (read recursively) or globs, local or on any Beam
filesystem; .jsonl/.json, .parquet, .arrow (a datasets.save_to_disk directory as it is),
.csv/.tsv, .txt, MediaWiki dumps (*pages-*.xml, the [wiki] extra: BERT's text passages of
each article), Common Crawl .warc (HTML responses, main text extracted), .warc.wet and
.html (the [web] extra), NamuWiki dumps (namuwiki*.json: its articles' plain passages),
모두의 말뭉치 JSON files (NWRW1800000022.json: one document
each, the [korean] extra), CC-100's text (--format cc100: a paragraph a line, a blank line
after each document), each optionally .gz, .zst, .bz2 or .xz. Records that cannot be used
(bad JSON or CSV, bad UTF-8, no text, longer than --max-record-bytes, a WARC response that
is not an HTML page) and documents a filter drops are counted by reason in .stats.json;
--rejects DIR keeps them.

Filters (--filters, comma-separated, applied in order; "gopher" means both Gopher filters):
  length             min/max characters
  c4                 C4's line and page rules (TFDS c4_utils)
  gopher-quality     Gopher's word-count, word-length, symbol and stop-word rules
  gopher-repetition  Gopher's duplicate line/paragraph and repeated n-gram rules
  fineweb            FineWeb's punctuation, short-line, duplicate-line and list rules
  language           language ID (needs the [lang] extra, or [fasttext] and a model)
Every threshold is a flag below; defaults and sources are in docs/filters.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from clozeworks.commands import add_progress_flag, progress_wanted
from clozeworks.commands.flags import add_settings, settings_from
from clozeworks.corpus.text.filters import FILTERS, filter_params
from clozeworks.pipelines.clean import CleanConfig, CleanSettings, language_warning, run_clean

HELP = "raw files -> clean documents (normalize, filter)"
BEAM = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_progress_flag(p)
    p.add_argument(
        "--input",
        nargs="+",
        action="extend",
        required=True,
        metavar="PATH",
        help="files, dirs or globs",
    )
    p.add_argument("--output", required=True, metavar="DIR", help="document store to write")
    p.add_argument("--rejects", metavar="DIR", help="also write dropped records with their reason")
    add_settings(p, CleanSettings)
    add_filter_settings(p)


def add_filter_settings(p: Any, with_defaults: bool = True) -> None:
    """A flag per threshold of every filter (`--c4-min-words`, ...), from the registry;
    `with_defaults=False` leaves the defaults None (`cloze build`'s file fills in)."""
    for name in FILTERS:
        is_parser = isinstance(p, argparse.ArgumentParser)
        group = p.add_argument_group(f"{name} filter") if is_parser else p
        for param in filter_params(name):
            default = param.default if with_defaults else None
            _add_param(group, param.flag, param.type, default, param.help, param.default)


def _add_param(
    group: Any, flag: str, kind: type, default: Any, help_: str, shown: Any = None
) -> None:
    dest = "filter__" + flag.replace("-", "_")
    shown = default if shown is None else shown
    if kind is bool:
        group.add_argument(
            f"--{flag}",
            dest=dest,
            action=argparse.BooleanOptionalAction,
            default=default,
            help=f"{help_} (default: {shown})",
        )
    else:
        group.add_argument(
            f"--{flag}",
            dest=dest,
            type=kind,
            default=default,
            metavar={int: "N", float: "X"}.get(kind, "S"),
            help=f"{help_} (default: {shown!r})",
        )


def filter_options(args: argparse.Namespace, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per-filter keyword arguments from the parsed flags."""
    return {
        name: {
            p.field: getattr(args, "filter__" + p.flag.replace("-", "_"))
            for p in filter_params(name)
        }
        for name in names
    }


def settings_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The clean settings the flags describe (`cloze build` builds its clean stage with it)."""
    values = settings_from(args, CleanSettings)
    values["filter_options"] = filter_options(args, values["filters"])
    return values


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    config = CleanConfig(
        inputs=args.input, output=args.output, rejects=args.rejects, **settings_from_args(args)
    )
    stats = run_clean(config, beam_argv, progress_wanted(args))
    dropped = sum(v for k, v in stats.items() if k.startswith("dropped."))
    read_as = ", ".join(f"{n} {fmt}" for fmt, n in stats.get("formats", {}).items())
    print(
        f"cleaned {stats['documents_in']} documents of {stats['files']} file(s) ({read_as}): "
        f"kept {stats['documents_out']}, dropped {dropped} -> {args.output}"
    )
    for reason, skipped in stats.get("skipped_files", {}).items():
        first = (skipped.get("errors") or skipped["first"])[0]
        print(
            f"skipped {skipped['count']} input file(s) as {reason}, e.g. {first} "
            "(all counted, the first 20 named, in .stats.json)",
            file=sys.stderr,
        )
    warning = language_warning(stats)
    if warning:
        print(f"clean: {warning}", file=sys.stderr)
    for name, count in stats.get("meta_fields", {}).items():
        if not count:
            print(f"--meta-fields: no record read had {name!r}", file=sys.stderr)
    return 0
