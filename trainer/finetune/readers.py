"""Examples of a task's split, from TSV (GLUE: tab-separated, no quoting), CSV, JSON lines
or a JSON array of objects (KLUE's files; a field may be a dotted path into an object).

A row that cannot be an example (too few columns, an empty text, a label outside the task's
set, a score that is not a number) is an error naming the file and line, or, for a task
whose `bad_rows` is "skip", counted in `Examples.skipped` and left out.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clozeworks.schemas.errors import BadInputError
from clozeworks.schemas.validate import loads
from clozeworks.trainer.finetune.markers import SpanError, mark
from clozeworks.trainer.finetune.tasks import TaskSpec

# GLUE's QQP and MNLI have fields far longer than csv's default 128 KB limit allows for.
csv.field_size_limit(min(sys.maxsize, (1 << 31) - 1))


@dataclass(frozen=True)
class Example:
    text_a: str
    text_b: str | None
    label: float  # a class index for classification, the score for regression
    line: int
    # Multiple choice: the options' texts, in the order of the task's labels; text_a is
    # the context and text_b the question (None: the option alone follows the context).
    options: tuple[str, ...] = ()


@dataclass
class Examples:
    path: Path
    items: list[Example] = field(default_factory=list)
    skipped: int = 0


class BadRow(Exception):
    pass


def _rows(spec: TaskSpec, path: Path) -> Iterator[tuple[int, Any]]:
    """(1-based line, row): a dict for jsonl, else a list (with the header's names kept)."""
    if spec.format == "json":
        try:
            records = loads(path.read_bytes().decode("utf-8"))
        except json.JSONDecodeError as err:
            raise BadInputError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None
        if not isinstance(records, list):
            raise BadInputError(f"{path}: not a JSON array of examples")
        for number, record in enumerate(records, start=1):
            yield number, record if isinstance(record, dict) else BadRow("not an object")
        return
    with path.open(encoding="utf-8", newline="") as f:
        if spec.format == "jsonl":
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    record = loads(line)
                except json.JSONDecodeError as err:
                    yield number, BadRow(f"not JSON: {err.msg}")
                    continue
                yield number, record if isinstance(record, dict) else BadRow("not an object")
            return
        # GLUE's own readers use no quote character: a quote is text.
        reader = (
            csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            if spec.format == "tsv"
            else csv.reader(f)
        )
        for row in reader:
            yield reader.line_num, row


def _column(header: dict[str, int], column: str | int) -> int:
    if isinstance(column, int):
        return column
    if column not in header:
        raise KeyError(column)
    return header[column]


def _field(row: Any, key: str | int, index: int | None) -> Any:
    if isinstance(row, dict):
        value: Any = row
        for part in str(key).split(".") if key not in row else [key]:
            if not isinstance(value, dict) or value.get(part) is None:
                raise BadRow(f"no field {key!r}")
            value = value[part]
        return value
    assert index is not None
    if index >= len(row):
        raise BadRow(f"{len(row)} columns, column {index} wanted")
    return row[index]


def _value(row: Any, key: str | int, index: int | None) -> str:
    return str(_field(row, key, index))


def _options(
    spec: TaskSpec, row: Any, keys: list[Any], indices: list[int | None]
) -> tuple[str, ...]:
    """A multiple-choice row's options: one column each, or one field holding a list."""
    if len(spec.options) > 1:
        return tuple(_value(row, k, i) for k, i in zip(keys, indices, strict=True))
    found = _field(row, keys[0], indices[0])
    if not isinstance(found, list) or not all(isinstance(o, str) for o in found):
        raise BadRow(f"field {keys[0]!r} is not a list of option texts")
    return check_options(spec, tuple(found))


def check_options(spec: TaskSpec, options: tuple[str, ...]) -> tuple[str, ...]:
    if len(options) != len(spec.labels):
        raise BadRow(
            f"{len(options)} options, the task has {len(spec.labels)} ({', '.join(spec.labels)})"
        )
    return options


def read_examples(spec: TaskSpec, data: Path, split: str) -> Examples:
    path = spec.path(data, split)
    if not path.is_file():
        raise BadInputError(f"{path}: no such file ({spec.name}'s {split} split)")
    out = Examples(path)
    labels = {label: i for i, label in enumerate(spec.labels)}
    keys = [spec.text_a, spec.text_b, spec.label, *spec.options]
    indices = [c if isinstance(c, int) else None for c in keys]
    header_seen = spec.format in ("jsonl", "json") or not spec.header
    try:
        for number, row in _rows(spec, path):
            if not header_seen:
                names = {name: i for i, name in enumerate(row)}
                try:
                    indices = [None if k is None else _column(names, k) for k in keys]
                except KeyError as err:
                    raise BadInputError(
                        f"{path}:{number}: header has no column {err.args[0]!r} "
                        f"(it has {', '.join(map(repr, row))})"
                    ) from None
                header_seen = True
                continue
            try:
                if isinstance(row, BadRow):
                    raise row
                out.items.append(_example(spec, labels, row, keys, indices, number))
            except BadRow as err:
                if spec.bad_rows == "skip":
                    out.skipped += 1
                    continue
                where = f"{path}: record {number}" if spec.format == "json" else f"{path}:{number}"
                raise BadInputError(f"{where}: {err}") from None
    except UnicodeDecodeError as err:
        raise BadInputError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except csv.Error as err:
        raise BadInputError(f"{path}: {err}") from None
    if not out.items:
        raise BadInputError(f"{path}: no examples")
    return out


def _example(
    spec: TaskSpec,
    labels: dict[str, int],
    row: Any,
    keys: list[Any],
    indices: list[int | None],
    number: int,
) -> Example:
    text_a = _value(row, keys[0], indices[0])
    text_b = None if keys[1] is None else _value(row, keys[1], indices[1])
    options = _options(spec, row, keys[3:], indices[3:]) if spec.options else ()
    # A multiple-choice question may be empty (its options complete the context).
    if not text_a.strip() or (text_b is not None and not text_b.strip() and not options):
        raise BadRow("empty text")
    if spec.entities:
        entities = [_field(row, name, None) for name in spec.entities]
        try:
            text_a = mark(text_a, entities, spec.entities)
        except SpanError as err:
            raise BadRow(str(err)) from None
    raw = _value(row, keys[2], indices[2]).strip()
    if spec.shape == "regression":
        try:
            label = float(raw)
        except ValueError:
            raise BadRow(f"score {raw!r} is not a number") from None
        if label != label:  # NaN
            raise BadRow("score is NaN")
    elif raw in labels:
        label = float(labels[raw])
    else:
        raise BadRow(f"label {raw!r} is not one of {', '.join(spec.labels)}")
    return Example(text_a, text_b, label, number, options)
