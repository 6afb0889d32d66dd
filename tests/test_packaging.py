"""What installing clozeworks puts on a machine: one import name of ours, every module."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"clozeworks": "clozeworks", "corpus": "clozeworks/corpus"}
FOLDERS |= {name: f"clozeworks/{name}" for name in ("pipelines", "schemas", "trainer")}


def _wheel(tmp_path: Path) -> zipfile.ZipFile:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run(
        [*pip, "--quiet", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("clozeworks-*.whl")
    return zipfile.ZipFile(wheel)


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
