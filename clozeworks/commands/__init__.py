"""One module per verb: HELP, add_arguments(parser), run(args, beam_argv) -> int."""

from __future__ import annotations

import argparse
import sys


def add_progress_flag(p: argparse.ArgumentParser, what: str = "progress bars") -> None:
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"{what} on stderr (default: when stderr is a terminal)",
    )


def progress_wanted(args: argparse.Namespace) -> bool:
    """--progress / --no-progress as given, else whether stderr is a terminal."""
    flag = getattr(args, "progress", None)
    return sys.stderr.isatty() if flag is None else bool(flag)
