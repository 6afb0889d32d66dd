"""A downstream task built offline, to show what pretraining buys: which package of the
standard library a docstring documents.

The texts are the demo corpus's own docstrings (as BERT pretrains on Wikipedia and is then
fine-tuned on SQuAD, whose paragraphs are Wikipedia's): pretraining saw them without
labels; the labels are new. Four packages with vocabularies of their own (asyncio, email,
tkinter, xml), each docstring's whitespace collapsed, equal texts once. Few labelled
examples (40 per package for training) and many held out for dev (up to 200 per package,
never in train): a model that starts from nothing can only learn the words it sees in
160 examples; a pretrained one knows how the rest of the vocabulary is used.
"""

from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path

from clozeworks.corpus.text.demo import iter_docstrings

PACKAGES = ("asyncio", "email", "tkinter", "xml")

TASK_TOML = """name = "stdlib-package"
shape = "single"
format = "tsv"
text_a = "docstring"
label = "package"
labels = ["asyncio", "email", "tkinter", "xml"]
metrics = ["accuracy", "f1_macro"]
[files]
train = "train.tsv"
dev = "dev.tsv"
"""


@lru_cache(maxsize=2)
def package_docstrings(root: Path | None = None) -> dict[str, list[str]]:
    """Each package's docstrings, whitespace collapsed, unique and sorted (parsing the
    standard library takes seconds, so the answer is kept)."""
    found: dict[str, set[str]] = {p: set() for p in PACKAGES}
    for doc in iter_docstrings(root):
        package = doc["module"].split(".")[0]
        if package in found:
            found[package].add(" ".join(doc["text"].split()))
    return {p: sorted(texts) for p, texts in found.items()}


def write_package_task(
    directory: Path, seed: int = 0, train_per_class: int = 40, dev_per_class: int = 200
) -> tuple[int, int]:
    """train.tsv, dev.tsv (header `docstring<TAB>package`) and task.toml in `directory`;
    returns (train, dev) example counts."""
    rng = random.Random(seed)
    train, dev = [], []
    for package, texts in package_docstrings().items():
        if len(texts) < train_per_class + 10:
            raise ValueError(f"only {len(texts)} docstrings of {package} in this Python")
        shuffled = list(texts)
        rng.shuffle(shuffled)
        train += [f"{t}\t{package}" for t in shuffled[:train_per_class]]
        dev += [f"{t}\t{package}" for t in shuffled[train_per_class:][:dev_per_class]]
    rng.shuffle(train)
    rng.shuffle(dev)
    directory.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train.tsv", train), ("dev.tsv", dev)):
        tmp = directory / f".{name}.tmp"
        tmp.write_text("docstring\tpackage\n" + "\n".join(rows) + "\n", encoding="utf-8")
        tmp.replace(directory / name)
    (directory / "task.toml").write_text(TASK_TOML, encoding="utf-8")
    return len(train), len(dev)
