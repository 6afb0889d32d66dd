"""Command-line flags derived from settings classes (schemas/settings.py): a setting's
flag, type, choices, default and help are its field's, written once where it is defined."""

from __future__ import annotations

import argparse
from typing import Any

from clozeworks.schemas.errors import ClozeError, SettingError
from clozeworks.schemas.settings import Setting, settings_of


def add_settings(
    p: Any, cls: type, *, with_defaults: bool = True, skip: frozenset[str] = frozenset()
) -> None:
    """A flag for every setting of `cls` (a parser or an argument group), its dest the
    field's name. `with_defaults=False` leaves every default None (`cloze build` tells a
    flag given from one not given, so its TOML file can fill in) and says it in the help."""
    taken = {o for a in getattr(p, "_actions", []) for o in a.option_strings}
    for s in settings_of(cls):
        if s.name in skip or s.flag in taken:
            continue
        _add(p, s, with_defaults)


def _add(p: Any, s: Setting, with_defaults: bool) -> None:
    default = s.default if with_defaults and not s.required else None
    help_ = s.help
    if not with_defaults and s.default not in (None, False) and not s.required:
        help_ += f" (default: {_shown(s.default)})"
    kw: dict[str, Any] = {"dest": s.name, "default": default, "help": help_.replace("%", "%%")}
    if s.kind is bool:
        p.add_argument(s.flag, action=argparse.BooleanOptionalAction, **kw)
        return
    if s.metavar:
        kw["metavar"] = s.metavar
    if s.parse is None and s.kind in (int, float):
        kw["type"] = s.kind
    if s.choices is not None:
        kw["choices"] = s.choices
    p.add_argument(s.flag, required=s.required and with_defaults, **kw)


def _shown(value: Any) -> str:
    if isinstance(value, tuple | list):
        return ",".join(map(str, value))
    return str(value)


def settings_from(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The values of `cls`'s settings among the parsed flags, by field name (settings with
    no flag here are left out, to keep their defaults). A setting with its own reading
    (a size, a list) is read here, so a bad value is one line naming the setting."""
    out = {}
    for s in settings_of(cls):
        if not hasattr(args, s.name):
            continue
        value = getattr(args, s.name)
        if s.parse is not None and isinstance(value, str):
            try:
                value = s.parse(value)
            except (ValueError, ClozeError) as err:
                raise SettingError(s.name, str(err)) from None
        out[s.name] = value
    return out


def flag_of(parser: argparse.ArgumentParser, setting: str) -> str | None:
    """The flag a parser gives the setting (a field name), None if it has none."""
    for action in parser._actions:
        named = [o for o in action.option_strings if not o.startswith("--no-")]
        if action.dest == setting and named:
            return named[0]
    return None
