"""Settings from a file or `KEY=VALUE` pairs, laid over a settings class's values: the one
reader of `cloze build --config`, `cloze train --config`/`--set` and a run's config.json.

A file is TOML (`.toml`) or JSON (anything else, e.g. a run's own config.json); a value is
checked against its setting (schemas/settings.py) as it is read, so a slip is named with
the file and key it came from."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clozeworks.schemas.errors import BadInputError, ClozeError, UsageError
from clozeworks.schemas.settings import Setting
from clozeworks.schemas.validate import loads


def read_table(path: Path, kind: str | None = None) -> dict[str, Any]:
    """The table of settings in `path`, read as `kind` ("TOML" or "JSON"; by default
    TOML for a `.toml` file, else JSON); BadInputError names the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise BadInputError(f"{path}: cannot read ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise BadInputError(f"{path}: not UTF-8 text ({err})") from None
    kind = kind or ("TOML" if path.suffix == ".toml" else "JSON")
    try:
        data = tomllib.loads(text) if kind == "TOML" else loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as err:
        raise BadInputError(f"{path}: not valid {kind} ({err})") from None
    if not isinstance(data, dict):
        raise BadInputError(f"{path}: expected a table of settings")
    return data


def pairs_table(pairs: Sequence[str], source: str) -> dict[str, Any]:
    """`KEY=VALUE` pairs as a TOML file would give them: KEY dotted into a section
    (`model.hidden_size`), VALUE a TOML value, or a bare word taken as a string."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, eq, text = pair.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"{source} {pair!r}: expected KEY=VALUE")
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text  # a bare word: a string, as `model.family=albert`
        *sections, name = key.strip().split(".")
        target = out
        for section in sections:
            target = target.setdefault(section, {})
            if not isinstance(target, dict):
                raise UsageError(f"{source} {pair!r}: {section} is not a section")
        target[name] = value
    return out


def checked(source: str, key: str, s: Setting, value: Any) -> Any:
    """A file's value for setting `s` as the setting holds it: a text its `parse` reads
    (a size, a comma-separated list), a list as a tuple, an int as a float where a float
    is wanted; UsageError naming `source` and `key` when it cannot be."""
    none = value is None and s.optional
    if isinstance(value, str) and s.parse is not None:
        try:
            return s.parse(value)
        except (ValueError, ClozeError) as err:
            raise UsageError(f"{source}: {key}: {err}") from None
    if s.many and isinstance(value, list | tuple):
        return tuple(_item(source, key, s, v) for v in value)
    return value if none else _item(source, key, s, value)


def _item(source: str, key: str, s: Setting, value: Any) -> Any:
    if s.kind in (int, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise UsageError(f"{source}: {key} must be a number, got {value!r}")
        if s.kind is int and isinstance(value, float) and not value.is_integer():
            raise UsageError(f"{source}: {key} must be whole, got {value!r}")
        value = s.kind(value)
    if s.choices is not None and value not in s.choices:
        choices = ", ".join(map(str, s.choices))
        raise UsageError(f"{source}: {key} must be one of {choices}, got {value!r}")
    if s.kind is bool and not isinstance(value, bool):
        raise UsageError(f"{source}: {key} must be true or false, got {value!r}")
    if s.kind is str and not isinstance(value, str):
        raise UsageError(f"{source}: {key} must be text, got {value!r}")
    return value
