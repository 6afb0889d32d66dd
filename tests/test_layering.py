"""docs/design.md's layering, checked on every import in the tree (lazy ones included):
`clozeworks (the cli) -> pipelines, trainer -> corpus -> schemas`; inside corpus/ each
stage reaches only the stages below it, inside trainer/ each layer only the layers below
it; no import cycle anywhere; every import of ours spelled `clozeworks.`."""

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
    "corpus.locks": {"schemas", "corpus.outputs"},
    "corpus.progress": set(),
    "corpus.text": {"schemas"},
    "corpus.vocab": {"schemas"},
    "corpus.dedup": {"schemas", "corpus.text"},
    # Shards encode with the vocabulary's fastest exact encoder (corpus/vocab/fast.py).
    "corpus.shards": {"schemas", "corpus.text", "corpus.outputs", "corpus.vocab"},
    "corpus.inspect": {"schemas", "corpus.shards", "corpus.vocab", "corpus.text"}
    | {"corpus.outputs", "corpus.locks"},
    "pipelines": {"schemas", "corpus"},
    # Beam plumbing: below every stage module, which may all use it.
    "pipelines.plumbing": {"schemas", "corpus"},
    "trainer": {"schemas", "corpus"},
    "cli": {"schemas", "corpus", "pipelines", "trainer"},
}
# Inside trainer/, lowest first: a module imports only from its own layer or lower ones.
# The network's blocks sit below the heads, the heads below each family's model and the
# encoder-with-heads composite, those below the family registry, which everything that
# asks about a family (objectives, presets, export, fine-tuning, the loop) sits above.
TRAINER_LAYERS = [
    {"config", "batch_index", "checkpoint", "metrics", "nonfinite", "distributed"}
    | {"preempt", "rundir", "fsdp", "precision", "tracking"},
    {"data"},
    {"models.hf", "models.bert"},
    {"heads", "head_parts", "distill.losses", "distill.parts"},
    {"models", "pretraining"},
    {"families", "optim"},
    {"objectives", "presets", "datasets"},
    {"export", "init_from", "publish", "bucket_run"},
    {"finetune", "distill"},
    {"assembly", "checkpointer", "loop", "runinfo"},
]
# Third-party packages a room must not need: corpus/ is usable without Beam, the trainer
# never starts a pipeline.
FORBIDDEN_LIBRARIES = {"corpus": {"apache_beam"}, "schemas": {"apache_beam", "torch"}}
FORBIDDEN_LIBRARIES["trainer"] = {"apache_beam"}
# Folders whose Python files import our code: the rooms, and the tests and benchmarks.
READERS = ("clozeworks", "corpus", "pipelines", "schemas", "trainer", "tests", "bench")


def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "clozeworks":
        return None
    if len(parts) == 1 or parts[1] not in ("corpus", "pipelines", "schemas", "trainer"):
        return "cli"
    if parts[1] == "corpus" and len(parts) > 2:
        return f"corpus.{parts[2]}"
    if parts[1:3] == ["pipelines", "plumbing"]:
        return "pipelines.plumbing"
    return parts[1]


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            yield from ((node.lineno, f"{node.module}.{a.name}") for a in node.names)
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)


def _resolved(path: Path, modules: set[str]) -> Iterator[tuple[int, str]]:
    """Each import as the module of ours it runs: `from a.b import c` is a.b.c when that
    is a module, else a.b."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                yield node.lineno, name


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


def _trainer_layer(module: str) -> int | None:
    """The layer of a module of clozeworks.trainer (its longest listed prefix)."""
    if not module.startswith("clozeworks.trainer."):
        return None
    name = module.removeprefix("clozeworks.trainer.")
    best: tuple[int, int] | None = None
    for level, names in enumerate(TRAINER_LAYERS):
        for listed in names:
            inside = name == listed or name.startswith(listed + ".")
            if inside and (best is None or len(listed) > best[0]):
                best = (len(listed), level)
    return None if best is None else best[1]


def test_trainer_layers_point_down() -> None:
    wrong, unlisted = [], []
    modules = {m for _, m in _sources()}
    for path, module in _sources():
        if not module.startswith("clozeworks.trainer.") and module != "clozeworks.trainer":
            continue
        level = _trainer_layer(module)
        if module != "clozeworks.trainer" and level is None:
            unlisted.append(module)
            continue
        for line, imported in _resolved(path, modules):
            target = _trainer_layer(imported)
            if level is not None and target is not None and target > level:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {module} imports {imported}")
    assert unlisted == []  # a new module gets a layer in TRAINER_LAYERS
    assert wrong == []


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours that importing it runs: every import, lazy ones
    included, and each parent package (importing a.b.c runs a/__init__ and a/b/__init__
    first). A package importing its own submodules (re-exporting them) is not an edge:
    that is what a package is."""
    modules = {m: p for p, m in _sources()}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        deps = {
            imported
            for _, imported in _resolved(path, set(modules))
            if not imported.startswith(module + ".")
        }
        parts = module.split(".")
        deps |= {".".join(parts[:k]) for k in range(2, len(parts))} & modules.keys()
        deps.discard(module)
        graph[module] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_our_imports_are_spelled_clozeworks() -> None:
    """`corpus.x` would import the checkout's folder as a second, generic package (or
    nothing, once installed); everything of ours is `clozeworks.`."""
    bare = [
        f"{path.relative_to(ROOT)}:{line}: {imported}"
        for folder in READERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, imported in _imports(path)
        if imported.split(".")[0] in ("corpus", "pipelines", "schemas", "trainer", "cloze")
    ]
    assert bare == []


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
    assert not _covers(_allowed("pipelines.plumbing"), "pipelines")
    # the model blocks below the heads, a family's model above them
    assert _trainer_layer("clozeworks.trainer.models.bert") < _trainer_layer(
        "clozeworks.trainer.heads"
    )
    assert _trainer_layer("clozeworks.trainer.models.gpt") > _trainer_layer(
        "clozeworks.trainer.heads"
    )
    # a lazy import back into a package that imports outside itself is a cycle
    graph = {"p": {"q"}, "p.m": {"p"}, "q": {"p.m"}}
    assert cycles(graph) == [["p", "p.m", "q"]]
