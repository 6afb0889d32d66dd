"""Typed reads from parsed JSON that name the bad field when the type is wrong."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from clozeworks.schemas.errors import BadInputError, SchemaError

T = TypeVar("T")

_MISSING = object()

# Ceilings on the files a run reads back, checked on the file's size before it is read,
# so an edited or hostile file is one line rather than memory taken until killed. Each is
# far above what this project writes: a run's config.json or a manifest of 100,000 shards
# is a few MB; tokenizer.json of a 250,000-piece vocabulary (mT5's, XLM-R's) about 20 MB.
MAX_JSON_BYTES = 64 << 20
MAX_TOKENIZER_BYTES = 512 << 20


def loads(text: str | bytes) -> Any:
    """`json.loads` for text from a file: nesting deeper than Python's parser recurses (it
    raises RecursionError, which no reader expects) is a JSONDecodeError like any other
    text that is not JSON, so every reader's `except ValueError` names the file."""
    try:
        return json.loads(text)
    except RecursionError:
        shown = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError("nested too deeply", shown, 0) from None


def read_bounded(path: Path, limit: int, what: str) -> bytes:
    """The bytes of `path`, a `what` of at most `limit` bytes; BadInputError naming the file
    and its size past the ceiling (read no further than one byte beyond it, so a FIFO or a
    file still growing is bounded too), or why it cannot be read."""
    try:
        with path.open("rb", buffering=0) as f:
            # A pipe answers a read with what it holds: read until past the limit or EOF.
            chunks, held = [], 0
            while held <= limit and (chunk := f.read(limit + 1 - held)):
                chunks.append(chunk)
                held += len(chunk)
        data = b"".join(chunks)
    except OSError as err:
        raise BadInputError(f"{path}: cannot read ({err.strerror or err})") from None
    if len(data) > limit:
        try:
            stated = path.stat().st_size
        except OSError:
            stated = 0
        size = f"{stated:,} bytes" if stated > limit else f"more than {limit:,} bytes"
        raise BadInputError(
            f"{path}: {size}, past the {limit:,} a {what} can have: not a file this project "
            "wrote, or damaged"
        )
    return data


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file holding an object (a run's or a transformers directory's config.json);
    BadInputError naming the file when it cannot be read, is past MAX_JSON_BYTES, is not
    JSON, or holds no object."""
    raw = read_bounded(path, MAX_JSON_BYTES, "JSON file")
    try:
        data = loads(raw.decode("utf-8"))
    except ValueError as err:
        raise BadInputError(f"{path}: cannot read ({err})") from None
    if not isinstance(data, dict):
        raise BadInputError(f"{path}: not a JSON object")
    return data


class Fields:
    """A JSON object being read into a dataclass; every error names `source` and the field."""

    def __init__(self, source: str, data: Any, path: str = "") -> None:
        if not isinstance(data, Mapping):
            raise SchemaError(source, path or "<top>", f"expected an object, got {_kind(data)}")
        self.source = source
        self.data = data
        self.path = path

    def _name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def _get(self, key: str, default: Any) -> Any:
        value = self.data.get(key, _MISSING)
        if value is _MISSING:
            if default is _MISSING:
                raise SchemaError(self.source, self._name(key), "missing")
            return default
        return value

    def _fail(self, key: str, expected: str, value: Any) -> SchemaError:
        return SchemaError(self.source, self._name(key), f"expected {expected}, got {_kind(value)}")

    def get_str(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is not default and not isinstance(value, str):
            raise self._fail(key, "a string", value)
        return value

    def get_int(
        self,
        key: str,
        default: Any = _MISSING,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> Any:
        value = self._get(key, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(key, "an integer", value)
        if minimum is not None and value < minimum:
            raise SchemaError(self.source, self._name(key), f"must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise SchemaError(self.source, self._name(key), f"must be <= {maximum}, got {value}")
        return value

    def get_float(self, key: str, default: Any = _MISSING, lo: float = 0.0, hi: float = 1.0) -> Any:
        value = self._get(key, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._fail(key, "a number", value)
        if not lo <= value <= hi:
            raise SchemaError(self.source, self._name(key), f"must be in [{lo}, {hi}], got {value}")
        return float(value)

    def get_obj(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is default or value is None:
            return value
        return Fields(self.source, value, self._name(key))

    def get_list(self, key: str) -> list[Fields]:
        value = self._get(key, _MISSING)
        if not isinstance(value, list):
            raise self._fail(key, "a list", value)
        return [
            Fields(self.source, item, f"{self._name(key)}[{i}]") for i, item in enumerate(value)
        ]

    def get_mapping(self, key: str, value_type: type[T], default: Any = _MISSING) -> dict[str, T]:
        value = self._get(key, default)
        if not isinstance(value, Mapping):
            raise self._fail(key, "an object", value)
        for k, v in value.items():
            if isinstance(v, bool) or not isinstance(v, value_type):
                raise SchemaError(
                    self.source, f"{self._name(key)}.{k}", f"expected {value_type.__name__}"
                )
        return dict(value)

    def get_choice(self, key: str, choices: tuple[str, ...], default: Any = _MISSING) -> Any:
        value = self.get_str(key, default)
        if value is not default and value not in choices:
            raise SchemaError(
                self.source, self._name(key), f"{value!r} is not one of {', '.join(choices)}"
            )
        return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )
