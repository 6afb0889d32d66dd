"""docs/design.md's layering, checked on every import in the tree (lazy ones included):
`clozeworks (the cli) -> pipelines, trainer -> corpus -> schemas`, and inside corpus/ each
stage reaches only the stages below it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_OF = {
    "clozeworks": "clozeworks",
    "corpus": "clozeworks.corpus",
    "pipelines": "clozeworks.pipelines",
    "schemas": "clozeworks.schemas",
    "trainer": "clozeworks.trainer",
}
# What each room may import of ours (beside itself). Rooms are the top folders and, inside
# corpus/, the stages; `corpus` alone is a file at corpus/'s top (outputs.py).
ALLOWED = {
    "schemas": set(),
    "corpus.outputs": {"schemas"},
    "corpus.text": {"schemas"},
    "corpus.vocab": {"schemas"},
    "corpus.dedup": {"schemas", "corpus.text"},
    "corpus.shards": {"schemas", "corpus.text", "corpus.outputs"},
    "corpus.inspect": {"schemas", "corpus.shards", "corpus.vocab", "corpus.text"},
    "pipelines": {"schemas", "corpus"},
    "trainer": {"schemas", "corpus"},
    "cli": {"schemas", "corpus", "pipelines", "trainer"},
}
# Third-party packages a room must not need: corpus/ is usable without Beam, the trainer
# never starts a pipeline.
FORBIDDEN_LIBRARIES = {"corpus": {"apache_beam"}, "schemas": {"apache_beam", "torch"}}
FORBIDDEN_LIBRARIES["trainer"] = {"apache_beam"}


def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "clozeworks":
        return None
    if len(parts) == 1 or parts[1] not in ("corpus", "pipelines", "schemas", "trainer"):
        return "cli"
    if parts[1] == "corpus" and len(parts) > 2:
        return f"corpus.{parts[2]}"
    return parts[1]


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            yield from ((node.lineno, f"{node.module}.{a.name}") for a in node.names)
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)


def _sources() -> Iterator[tuple[Path, str]]:
    for folder, package in PACKAGE_OF.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            module = ".".join((package, *parts)).removesuffix(".__init__")
            yield path, module


def _allowed(room: str) -> set[str]:
    return ALLOWED.get(room, ALLOWED.get(room.split(".")[0], set()))


def _covers(allowed: set[str], target: str) -> bool:
    return any(target == a or target.startswith(a + ".") for a in allowed)


def test_every_import_points_down() -> None:
    wrong = []
    for path, module in _sources():
        room = _room(module)
        assert room is not None
        for line, imported in _imports(path):
            target = _room(imported)
            if target is None or target == room or target.split(".")[0] == room:
                continue
            if room.startswith("corpus.") and target == "corpus":
                continue  # `from clozeworks.corpus.shards import keys` names the package
            if not _covers(_allowed(room), target):
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {room} imports {imported}")
    assert wrong == []


@pytest.mark.parametrize("folder", sorted(FORBIDDEN_LIBRARIES))
def test_rooms_do_not_need_libraries_of_the_floors_above(folder: str) -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {imported}"
        for path, _ in _sources()
        if path.relative_to(ROOT).parts[0] == folder
        for line, imported in _imports(path)
        if imported.split(".")[0] in FORBIDDEN_LIBRARIES[folder]
    ]
    assert found == []


def test_the_rules_can_fail() -> None:
    # An upward import is caught: a stage of corpus reaching the inspect stage above it.
    assert not _covers(_allowed("corpus.shards"), "corpus.inspect")
    assert not _covers(_allowed("corpus"), "pipelines")
    assert _room("clozeworks.trainer.data.loader") == "trainer"
    assert _room("clozeworks.cli") == "cli"
