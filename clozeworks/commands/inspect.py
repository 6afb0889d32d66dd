"""Tell what is inside a document store, tokenizer, shard set or training run.

Shard sets: totals, sequence lengths, padding waste at --batch-size, pair labels and
segment lengths, pre-masked predictions, token usage, and a per-shard table; every block is
decoded. --verify also recomputes every shard's sha256; damaged shards are named and the
exit code is 1. --show N decodes N sequences with [MASK], segments and labels visible.
--reencode N decodes the first N sequences of every shard and encodes that text with the
encoder `cloze shard` would choose here and with `tokenizers`; any difference is a problem.

--json prints one JSON document and nothing else on stdout (keys: docs/inspect.md).
--html FILE writes a self-contained report with plots (needs matplotlib).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from clozeworks.commands.fetched import fetched
from clozeworks.corpus.inspect.html import require_matplotlib, write_html
from clozeworks.corpus.inspect.mirror import mirror
from clozeworks.corpus.inspect.reencode import reencode
from clozeworks.corpus.inspect.shards import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_TOP_K,
    decode_examples,
    shard_summary,
)
from clozeworks.corpus.inspect.stages import (
    detect_kind,
    docs_summary,
    tokenizer_summary,
    transformers_summary,
    unfinished_runs,
)
from clozeworks.corpus.inspect.text import render
from clozeworks.corpus.progress import progress_bar
from clozeworks.corpus.shards.cache import is_remote
from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.schemas.manifest import read_manifest
from clozeworks.trainer.runinfo import run_summary

HELP = "summarize / verify any stage's output"
BEAM = False

__all__ = ["add_arguments", "render", "run"]


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path",
        metavar="PATH",
        help="docs, tokenizer, shards, run, fine-tuned or exported model directory; shards "
        "also by URL (https://, s3://, gs://: downloaded into the shard cache first)",
    )
    p.add_argument(
        "--verify", action="store_true", help="also check every shard's sha256 (exit 1 if bad)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON document, nothing else")
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML report with plots")
    p.add_argument("--show", type=_count, default=0, metavar="N", help="decode N sequences")
    p.add_argument(
        "--reencode",
        type=_count,
        default=0,
        metavar="N",
        help="decode N sequences of every shard and encode the text with the fast encoder "
        "and with tokenizers; exit 1 if any ids differ (shard sets; about 1 s to choose the "
        "encoder, then ~0.2 ms a sequence)",
    )
    p.add_argument(
        "--batch-size",
        type=_positive,
        default=DEFAULT_BATCH_SIZE,
        metavar="B",
        help=f"batch size for the padding-waste figures (default {DEFAULT_BATCH_SIZE})",
    )
    p.add_argument(
        "--top",
        type=_positive,
        default=DEFAULT_TOP_K,
        metavar="K",
        help=f"most frequent tokens to list (default {DEFAULT_TOP_K})",
    )


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    path = _local(args.path)
    kind = detect_kind(path)
    # The report names the URL, not where it was copied to.
    kind_path = args.path if is_remote(args.path) else None
    if args.html:
        # Fail before a long read if the report cannot be drawn.
        require_matplotlib()
    if kind == "shards":
        summary = _shards(path, args)
    elif args.verify or args.show or args.reencode:
        raise UsageError(f"--verify, --show and --reencode apply to shard sets; {path} is a {kind}")
    elif kind == "docs":
        summary = docs_summary(path)
    elif kind == "tokenizer":
        summary = tokenizer_summary(path)
    elif kind == "transformers":
        if args.html:
            raise UsageError("--html draws shard sets, document stores, tokenizers and runs")
        summary = transformers_summary(path)
    elif kind in ("finetuned", "multitask"):
        if args.html:
            raise UsageError("--html draws shard sets, document stores, tokenizers and runs")
        from clozeworks.trainer.finetune.store import finetuned_summary, multitask_summary

        summary = (finetuned_summary if kind == "finetuned" else multitask_summary)(path)
    else:
        summary = run_summary(path)
    summary["warnings"] = [*summary.get("warnings", []), *unfinished_runs(path)]
    if kind_path is not None:
        summary["path"] = kind_path
    if args.html:
        write_html(summary, Path(args.html))
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print(render(summary))
        if args.html:
            print(f"report: {args.html}")
    return 1 if summary.get("problems") else 0


def _local(path: str) -> Path:
    """A local path as is; a remote shard set (https://, s3://, gs://) mirrored into the
    shard cache first (corpus.shards.cache), then inspected there; any other output on a
    bucket (a store, a tokenizer, an export, a fine-tuned model: whole; a run: its files
    and newest committed step, as `--resume` fetches it) copied into a temporary folder."""
    if not is_remote(path):
        return Path(path)
    bar = progress_bar(None, "download", "bytes")
    try:
        if not path.startswith(("http://", "https://")) and not _holds_manifest(path):
            return fetched(path)
        return mirror(path, progress=bar.update)
    finally:
        bar.close()


def _holds_manifest(url: str) -> bool:
    import fsspec

    from clozeworks.schemas.sidecars import MANIFEST_FILE, names_of

    try:
        fs, root = fsspec.core.url_to_fs(url.rstrip("/"))
        return any(fs.exists(f"{root}/{name}") for name in names_of(MANIFEST_FILE))
    except (ImportError, ValueError, OSError) as err:
        raise BadInputError(f"{url}: cannot read it: {err}") from None


def _shards(path: Path, args: argparse.Namespace) -> dict[str, Any]:
    bar = progress_bar(read_manifest(path).bytes, "verify" if args.verify else "read", "bytes")
    try:
        summary = shard_summary(
            path,
            verify=args.verify,
            batch_size=args.batch_size,
            top_k=args.top,
            progress=bar.update,
        )
    finally:
        bar.close()
    if args.show:
        summary["examples"] = decode_examples(path, args.show)
    if args.reencode:
        check = reencode(path, args.reencode)
        summary["reencode"] = check
        summary["warnings"] = [*summary["warnings"], *check["warnings"]]
        summary["problems"] = [*summary["problems"], *check["problems"]]
    return summary
