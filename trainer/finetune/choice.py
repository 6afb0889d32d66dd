"""Multiple choice (RACE, SWAG, or a task file's own): a context, a question and N options;
the model scores `[CLS] context [SEP] question+option [SEP]` for each option and the
options' scores are softmaxed against each other.

- RACE's files as released: a directory tree of JSON objects, one per article, with the
  lists `questions`, `options` (N texts per question) and `answers` (a letter each).
- Other formats (SWAG's CSV, JSON lines, ...) through readers.py: one row per question,
  the options in columns of their own or in one list field.
- An option fills the question's blank where it has one (RACE's cloze questions, "_"),
  otherwise follows the question after a space (transformers' `utils_multiple_choice.py`
  and `run_swag.py`); the pair is cut longest-first to `--max-seq-len`, as there.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from clozeworks.schemas.errors import BadInputError
from clozeworks.schemas.validate import loads
from clozeworks.trainer.finetune.encoded import Encoded, encode
from clozeworks.trainer.finetune.readers import (
    BadRow,
    Example,
    Examples,
    check_options,
    read_examples,
)
from clozeworks.trainer.finetune.tasks import TaskSpec

# Examples encoded at once: their rows become int32 arrays before the next chunk, so a
# split's ids take 4 bytes a token (RACE's train split at 512: 88k questions x 4 options).
_CHUNK = 2048


def read_choices(spec: TaskSpec, data: Path, split: str) -> Examples:
    if spec.format != "race":
        return read_examples(spec, data, split)
    path = spec.path(data, split)
    if not path.exists():
        raise BadInputError(f"{path}: no such file or directory ({spec.name}'s {split} split)")
    files = [path] if path.is_file() else sorted(race_files(path))
    out = Examples(path)
    for file in files:
        out.items += _race_file(spec, file, len(out.items))
    if not out.items:
        raise BadInputError(f"{path}: no questions (RACE's files: one JSON object per article)")
    return out


def race_files(directory: Path) -> list[Path]:
    """Every file under `directory` (RACE's are `N.txt`), but hidden ones."""
    return [
        p
        for p in directory.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(directory).parts)
    ]


def _race_file(spec: TaskSpec, file: Path, first: int) -> list[Example]:
    try:
        article = loads(file.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as err:
        raise BadInputError(f"{file}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise BadInputError(f"{file}: not JSON ({err.msg} at line {err.lineno})") from None
    lists = _race_lists(file, article)
    labels = {label: i for i, label in enumerate(spec.labels)}
    items = []
    for n, (question, options, answer) in enumerate(zip(*lists, strict=True), start=1):
        try:
            if not isinstance(question, str) or not isinstance(options, list):
                raise BadRow("a question is a text and its options a list")
            if not all(isinstance(o, str) for o in options):
                raise BadRow("an option is not a text")
            found = check_options(spec, tuple(options))
            if answer not in labels:
                raise BadRow(f"answer {answer!r} is not one of {', '.join(spec.labels)}")
        except BadRow as err:
            raise BadInputError(f"{file}: question {n}: {err}") from None
        items.append(Example(article["article"], question, float(labels[answer]), n, found))
    return items


def _race_lists(file: Path, article: Any) -> tuple[list[Any], list[Any], list[Any]]:
    fields = ("article", "questions", "options", "answers")
    if not isinstance(article, dict) or any(k not in article for k in fields):
        raise BadInputError(f"{file}: not a RACE article (an object with {', '.join(fields)})")
    if not isinstance(article["article"], str) or not article["article"].strip():
        raise BadInputError(f"{file}: the article is empty or not a text")
    lists = [article[k] for k in fields[1:]]
    if not all(isinstance(v, list) for v in lists) or len({len(v) for v in lists}) != 1:
        sizes = ", ".join(f"{k} {len(v) if isinstance(v, list) else '(not a list)'}"
                          for k, v in zip(fields[1:], lists, strict=True))  # fmt: skip
        raise BadInputError(f"{file}: questions, options and answers differ in number ({sizes})")
    return lists[0], lists[1], lists[2]


def joined(question: str | None, option: str, blank: str | None) -> str:
    """The second text of an option's row."""
    if question is None or not question.strip():
        return option
    if blank and blank in question:
        return question.replace(blank, option)
    return f"{question} {option}"


def encode_choices(
    tokenizer: Tokenizer, examples: Sequence[Example], max_len: int, blank: str | None
) -> Encoded:
    """`choices` rows an example: `[CLS] context [SEP] question+option [SEP]`, each cut
    longest-first to `max_len` (encoded.encode)."""
    choices = len(examples[0].options)
    ids: list[np.ndarray] = []
    types: list[np.ndarray] = []
    truncated = 0
    for start in range(0, len(examples), _CHUNK):
        rows = [
            Example(e.text_a, joined(e.text_b, option, blank), e.label, e.line)
            for e in examples[start : start + _CHUNK]
            for option in e.options
        ]
        chunk = encode(tokenizer, rows, max_len)
        ids += [np.asarray(row, dtype=np.int32) for row in chunk.ids]
        types += [np.asarray(row, dtype=np.int8) for row in chunk.types]
        truncated += chunk.truncated
    labels = np.array([e.label for e in examples], dtype=np.float64)
    return Encoded(ids, types, labels, truncated, choices=choices)
