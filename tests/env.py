"""The environment of the `python -m ...` processes tests start."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def python_path() -> str:
    """The checkout first, then the PYTHONPATH the tests run under (dependencies installed
    beside the interpreter's own, say), which replacing it would lose."""
    return os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
