"""Tell what is inside a document store, tokenizer, shard set or training run.

--verify recomputes every shard's sha256 and decodes every block; it exits 1 naming each
damaged shard. --json prints one JSON document and nothing else on stdout.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from corpus.inspection import (
    decode_examples,
    detect_kind,
    docs_summary,
    shard_summary,
    tokenizer_summary,
)
from schemas.errors import UsageError
from trainer.runinfo import run_summary

HELP = "summarize / verify any stage's output"
BEAM = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH", help="docs, tokenizer, shards or run directory")
    p.add_argument("--verify", action="store_true", help="check every shard's checksum and blocks")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--html", metavar="FILE", help="write an HTML report (not available yet)")
    p.add_argument("--show", type=int, default=0, metavar="N", help="decode N sequences")


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    if args.html:
        raise UsageError("--html is not available yet; use --json or the terminal summary")
    path = Path(args.path)
    kind = detect_kind(path)
    if kind == "shards":
        summary = shard_summary(path, verify=args.verify)
        if args.show:
            summary["examples"] = decode_examples(path, args.show)
    elif kind == "docs":
        summary = docs_summary(path)
    elif kind == "tokenizer":
        summary = tokenizer_summary(path)
    else:
        summary = run_summary(path)
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print(render(summary))
    return 1 if summary.get("problems") else 0


def render(summary: dict[str, Any]) -> str:
    """The terminal view of a summary."""
    kind = summary["kind"]
    lines = [f"{kind}: {summary['path']}"]
    if kind == "shards":
        lines.append(
            f"  mode {summary['mode']}, max length {summary['max_seq_len']}, "
            f"{summary['vocab_kind']} vocabulary of {summary['vocab_size']}"
        )
        lines.append(
            f"  {summary['shards']} shards, {summary['blocks']} blocks, {summary['sequences']} "
            f"sequences, {summary['tokens']} tokens, {summary['bytes']} bytes "
            f"({summary['bytes_per_token']:.2f} bytes/token)"
        )
        if "sequence_length" in summary:
            sl = summary["sequence_length"]
            lines.append(
                f"  length min {sl.get('min')} mean {sl.get('mean', 0):.1f} p50 {sl.get('p50')} "
                f"p95 {sl.get('p95')} max {sl.get('max')}"
            )
        for shard in summary["per_shard"]:
            lines.append(
                f"  {shard['name']}  {shard['sequences']:>8} seq  {shard['tokens']:>10} tok  "
                f"{shard['bytes']:>11} B  {shard['state']}"
            )
        for problem in summary["problems"]:
            lines.append(f"  BAD {problem['shard']}: {problem['problem']}")
        if summary["verified"] and not summary["problems"]:
            lines.append("  verified: every checksum and block is intact")
        for ex in summary.get("examples", []):
            extra = "".join(f" {k}={ex[k]}" for k in ("segment_a", "label") if k in ex)
            lines.append(f"  [{ex['block']}#{ex['index']} len={ex['length']}{extra}] {ex['text']}")
    elif kind == "docs":
        ch = summary["characters"]
        lines.append(
            f"  {summary['documents']} documents in {summary['files']} files; characters "
            f"min {ch.get('min')} mean {ch.get('mean', 0):.0f} p95 {ch.get('p95')} "
            f"max {ch.get('max')}"
        )
        if not summary["complete"]:
            lines.append("  INCOMPLETE: no stats.json (interrupted run?)")
        for reason, count in sorted(summary["dropped"].items()):
            lines.append(f"  dropped {reason}: {count}")
        stats = summary["stats"] or {}
        if "duplicates" in stats:
            lines.append(f"  duplicates removed: {stats['duplicates']}")
    elif kind == "tokenizer":
        lines.append(f"  {summary['vocab_kind']}, {summary['vocab_size']} tokens")
        specials = ", ".join(f"{v['token']}={v['id']}" for v in summary["special_tokens"].values())
        lines.append(f"  special: {specials}")
    else:
        model = summary["model"]
        lines.append(
            f"  {model['family']} L{model['num_layers']}/H{model['hidden_size']}"
            f"/A{model['num_heads']}, "
            f"vocab {model['vocab_size']}, data {summary['data']}"
        )
        first, last = summary["first"], summary["last"]
        if first and last:
            lines.append(
                f"  steps {first['step']}..{last['step']}: MLM loss {first['mlm_loss']:.3f} -> "
                f"{last['mlm_loss']:.3f}, accuracy {first['mlm_accuracy']:.3f} -> "
                f"{last['mlm_accuracy']:.3f}"
            )
        if summary["tokens_per_s"]:
            lines.append(f"  throughput {summary['tokens_per_s']:.0f} tokens/s")
        lines.append(f"  checkpoints: {', '.join(summary['checkpoints']) or 'none'}")
    return "\n".join(lines)
