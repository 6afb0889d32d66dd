"""Read raw text files, normalize and filter them, and write a document store.

Inputs are files, directories (read recursively) or globs, local or on any Beam
filesystem; .jsonl/.json, .parquet and .txt, each optionally .gz or .zst. Records that
cannot be used (bad JSON, bad UTF-8, no text) are counted by reason in stats.json.
"""

from __future__ import annotations

import argparse

from corpus.filters import FILTERS
from corpus.normalize import NORMAL_FORMS
from corpus.readers import DOC_SEPS, FORMATS
from pipelines.clean import CleanConfig, run_clean

HELP = "raw files -> clean documents (normalize, filter)"
BEAM = True


def add_arguments(p: argparse.ArgumentParser) -> None:
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
        "--filters", default="length", help=f"comma-separated, from: {', '.join(sorted(FILTERS))}"
    )
    p.add_argument("--min-chars", type=int, default=1, help="length filter: shortest document kept")
    p.add_argument(
        "--max-chars", type=int, default=10_000_000, help="length filter: longest document kept"
    )


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    filters = [f for f in args.filters.split(",") if f]
    config = CleanConfig(
        inputs=args.input,
        output=args.output,
        fmt=args.format,
        text_field=args.text_field,
        id_field=args.id_field,
        doc_sep=args.doc_sep,
        normal_form=args.normalize,
        filters=filters,
        filter_options={"length": {"min_chars": args.min_chars, "max_chars": args.max_chars}},
    )
    stats = run_clean(config, beam_argv)
    dropped = sum(v for k, v in stats.items() if k.startswith("dropped."))
    print(
        f"cleaned {stats['documents_in']} documents: kept {stats['documents_out']}, "
        f"dropped {dropped} -> {args.output}"
    )
    return 0
