"""Read raw text files, normalize and filter them, and write a document store.

Inputs are files, directories (read recursively) or globs, local or on any Beam
filesystem; .jsonl/.json, .parquet and .txt, each optionally .gz, .zst, .bz2 or .xz.
Records that cannot be used (bad JSON, bad UTF-8, no text, longer than --max-record-bytes)
and documents a filter drops are counted by reason in stats.json; --rejects DIR keeps them.

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
from typing import Any

from clozeworks.commands import add_progress_flag, progress_wanted
from clozeworks.corpus.text.filters import FILTERS, expand_names, filter_params
from clozeworks.corpus.text.normalize import NORMAL_FORMS
from clozeworks.corpus.text.readers import DEFAULT_MAX_RECORD_BYTES, DOC_SEPS, FORMATS
from clozeworks.pipelines.clean import CleanConfig, run_clean
from clozeworks.schemas.errors import UsageError

HELP = "raw files -> clean documents (normalize, filter)"
BEAM = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_progress_flag(p)
    p.add_argument("--input", nargs="+", required=True, metavar="PATH", help="files, dirs or globs")
    p.add_argument("--output", required=True, metavar="DIR", help="document store to write")
    p.add_argument("--format", choices=FORMATS, help="record format (default: by extension)")
    p.add_argument("--text-field", default="text", help="JSON field / Parquet column of the text")
    p.add_argument("--id-field", help="field holding a document id (default: path#line)")
    p.add_argument(
        "--doc-sep",
        choices=DOC_SEPS,
        default="file",
        help=".txt: a file or a blank-line block per document",
    )
    p.add_argument("--normalize", choices=NORMAL_FORMS, default="NFC", help="Unicode normal form")
    p.add_argument(
        "--fix-mojibake",
        action="store_true",
        help="repair wrongly decoded text with ftfy (needs the [ftfy] extra)",
    )
    p.add_argument(
        "--filters",
        default="length",
        help=f"comma-separated, from: {', '.join(sorted([*FILTERS, 'gopher']))} (default: length)",
    )
    p.add_argument("--rejects", metavar="DIR", help="also write dropped records with their reason")
    p.add_argument(
        "--max-record-bytes",
        type=int,
        default=DEFAULT_MAX_RECORD_BYTES,
        help="longer raw records are counted as too_long and skipped unread",
    )
    for name in FILTERS:
        group = p.add_argument_group(f"{name} filter")
        for param in filter_params(name):
            _add_param(group, param.flag, param.type, param.default, param.help)


def _add_param(group: Any, flag: str, kind: type, default: Any, help_: str) -> None:
    dest = "filter__" + flag.replace("-", "_")
    if kind is bool:
        group.add_argument(
            f"--{flag}",
            dest=dest,
            action=argparse.BooleanOptionalAction,
            default=default,
            help=f"{help_} (default: {default})",
        )
    else:
        group.add_argument(
            f"--{flag}",
            dest=dest,
            type=kind,
            default=default,
            metavar={int: "N", float: "X"}.get(kind, "S"),
            help=f"{help_} (default: {default!r})",
        )


def filter_options(args: argparse.Namespace, names: list[str]) -> dict[str, dict[str, Any]]:
    """Per-filter keyword arguments from the parsed flags."""
    return {
        name: {
            p.field: getattr(args, "filter__" + p.flag.replace("-", "_"))
            for p in filter_params(name)
        }
        for name in names
    }


def config_from_args(args: argparse.Namespace) -> CleanConfig:
    """The CleanConfig the flags describe (`cloze build` builds its clean stage with it)."""
    try:
        filters = expand_names([f for f in args.filters.split(",") if f])
    except ValueError as err:
        raise UsageError(str(err)) from None
    return CleanConfig(
        inputs=args.input,
        output=args.output,
        fmt=args.format,
        text_field=args.text_field,
        id_field=args.id_field,
        doc_sep=args.doc_sep,
        normal_form=args.normalize,
        filters=filters,
        filter_options=filter_options(args, filters),
        fix_mojibake=args.fix_mojibake,
        rejects=args.rejects,
        max_record_bytes=args.max_record_bytes,
    )


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    config = config_from_args(args)
    stats = run_clean(config, beam_argv, progress_wanted(args))
    dropped = sum(v for k, v in stats.items() if k.startswith("dropped."))
    print(
        f"cleaned {stats['documents_in']} documents: kept {stats['documents_out']}, "
        f"dropped {dropped} -> {args.output}"
    )
    return 0
