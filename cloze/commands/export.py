"""Export a training run as a directory Hugging Face `transformers` loads."""

from __future__ import annotations

import argparse

from schemas.errors import UsageError

HELP = "run -> transformers model directory (not available yet)"
BEAM = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", required=True, metavar="DIR", help="training run directory")
    p.add_argument("--output", required=True, metavar="DIR", help="directory to write")


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    raise UsageError("export is not available yet; the checkpoint in --run is safetensors")
