"""One module per verb: HELP, add_arguments(parser), run(args, beam_argv) -> int."""

from __future__ import annotations

import argparse


def add_progress_flag(p: argparse.ArgumentParser, what: str = "progress") -> None:
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=f"{what} on stderr: bars on a terminal, else a plain line every "
        "$CLOZEWORKS_LOG_EVERY seconds (30)",
    )


def progress_wanted(args: argparse.Namespace) -> bool:
    """--progress / --no-progress as given (default on: bars or lines, by the stream)."""
    return bool(getattr(args, "progress", True))
