"""The README's shell examples, as the tests that run them read them."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"


def cloze_commands(heading: str) -> list[list[str]]:
    """The `cloze ...` lines of the first ```sh block after `heading`, each split as a shell
    would (continuation lines joined)."""
    section = README.read_text(encoding="utf-8").split(heading, 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, f"the README lost its example under {heading!r}"
    lines = block.group(1).replace("\\\n", " ").splitlines()
    return [shlex.split(line) for line in lines if line.startswith("cloze ")]
