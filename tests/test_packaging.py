"""What installing clozeworks puts on a machine: one import name of ours, every module."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from tests.wheel import FOLDERS, ROOT, build_wheel


def _wheel(tmp_path: Path) -> zipfile.ZipFile:
    return zipfile.ZipFile(build_wheel(tmp_path))


def test_wheel_holds_every_module_under_clozeworks_alone(tmp_path: Path) -> None:
    names = set(_wheel(tmp_path).namelist())
    tops = {n.split("/", 1)[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"clozeworks"}
    expected = {
        f"{prefix}/{path.relative_to(ROOT / folder).as_posix()}"
        for folder, prefix in FOLDERS.items()
        for path in (ROOT / folder).rglob("*.py")
    }
    # A package missing from pyproject's list would be left out of the wheel silently.
    assert expected - names == set()
    assert "clozeworks/py.typed" in names
    assert "clozeworks/corpus/vocab/jamo.charsmap" in names  # --hangul jamo's table


def test_generic_top_level_names_are_not_claimed(tmp_path: Path) -> None:
    # Run from elsewhere, so the checkout's own folders are not on sys.path.
    code = (
        "import importlib.util as u\n"
        "taken = [n for n in ('corpus', 'pipelines', 'schemas', 'trainer', 'cloze')"
        " if u.find_spec(n)]\n"
        "import clozeworks.corpus.shards.masking, clozeworks.trainer.data, clozeworks.cli\n"
        "print(taken)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
