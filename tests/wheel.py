"""This checkout built into a wheel, as `pip wheel --no-deps -w dist .` builds it for
Dataflow's `--extra_package` (offline, without build isolation)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"clozeworks": "clozeworks", "corpus": "clozeworks/corpus"}
FOLDERS |= {name: f"clozeworks/{name}" for name in ("pipelines", "schemas", "trainer")}


def build_wheel(tmp_path: Path) -> Path:
    """The wheel of the sources alone (a copy, so no build output lands in the checkout)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run([*pip, "--quiet", "-w", str(out), str(src)], check=True, capture_output=True)
    (wheel,) = out.glob("clozeworks-*.whl")
    return wheel
