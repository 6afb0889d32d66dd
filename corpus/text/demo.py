"""The built-in demo corpus: every module, class and function docstring of the running
Python's standard library, found by parsing its sources with `ast` (nothing is imported)."""

from __future__ import annotations

import ast
import gzip
import json
import sysconfig
from collections.abc import Iterator
from pathlib import Path

_SKIP_DIRS = {"test", "tests", "idlelib", "site-packages", "dist-packages", "__pycache__"}


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def iter_docstrings(root: Path | None = None, min_chars: int = 40) -> Iterator[dict[str, str]]:
    """Yield {"id", "text", "module"} for each docstring of at least `min_chars` characters,
    in a stable order (sorted paths, source order within a file)."""
    root = root or stdlib_dir()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if _SKIP_DIRS.intersection(rel.parts[:-1]):
            continue
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError, UnicodeDecodeError):
            continue  # a few stdlib files are templates or deliberately invalid
        module = ".".join(rel.with_suffix("").parts)
        for node in ast.walk(tree):
            if not isinstance(
                node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
            ):
                continue
            doc = ast.get_docstring(node, clean=True)
            if not doc or len(doc) < min_chars:
                continue
            name = getattr(node, "name", "")
            line = getattr(node, "lineno", 0)
            yield {"id": f"{module}:{line}:{name}", "text": doc, "module": module}
    return


def write_demo_corpus(path: Path, limit: int | None = None) -> int:
    """Write the docstrings as gzipped JSON lines at `path`; returns how many."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    with gzip.open(tmp, "wt", encoding="utf-8") as f:
        for doc in iter_docstrings():
            f.write(json.dumps(doc, ensure_ascii=False) + "\n")
            count += 1
            if limit is not None and count >= limit:
                break
    tmp.replace(path)
    return count
