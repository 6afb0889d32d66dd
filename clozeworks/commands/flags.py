"""Command-line flags derived from settings classes (schemas/settings.py): a setting's
flag, type, choices, default and help are its field's, written once where it is defined."""

from __future__ import annotations

import argparse
from typing import Any

from clozeworks.schemas.errors import ClozeError, SettingError
from clozeworks.schemas.settings import Setting, check_choice, settings_of


def add_settings(
    p: Any,
    cls: type,
    *,
    with_defaults: bool = True,
    skip: frozenset[str] = frozenset(),
    only: frozenset[str] | None = None,
    section: str = "",
    default_said: str | None = None,
) -> None:
    """A flag for every setting of `cls` (a parser or an argument group), its dest the
    field's name. `with_defaults=False` leaves every default None (`cloze build` tells a
    flag given from one not given, so its TOML file can fill in) and says it in the help,
    or says `default_said` instead (`cloze train`: "the preset's"). A `section`'s
    settings (`optim` of TrainConfig) have a flag only where the field names one (`lr`),
    their dest `section.name`."""
    taken = {o for a in getattr(p, "_actions", []) for o in a.option_strings}
    for s in settings_of(cls):
        if s.name in skip or (only is not None and s.name not in only) or s.flag in taken:
            continue
        if section and not s.named:
            continue
        _add(p, s, with_defaults, f"{section}.{s.name}" if section else s.name, default_said)


def _add(
    p: Any, s: Setting, with_defaults: bool, dest: str, default_said: str | None = None
) -> None:
    default = s.default if with_defaults and not s.required else None
    help_ = s.help
    if not with_defaults and default_said is not None:
        help_ += f" (default: {default_said})" if default_said else ""
    elif not with_defaults and s.default not in (None, False) and not s.required:
        help_ += f" (default: {_shown(s.default)})"
    kw: dict[str, Any] = {"dest": dest, "default": default, "help": help_.replace("%", "%%")}
    if s.kind is bool:
        p.add_argument(s.flag, action=argparse.BooleanOptionalAction, **kw)
        return
    # A section's dest (optim.lr) is no name to show; choices show themselves.
    if s.metavar or ("." in dest and s.choices is None):
        kw["metavar"] = s.metavar or s.flag[2:].upper().replace("-", "_")
    if s.parse is None and s.kind in (int, float) and not s.many:
        kw["type"] = s.kind
    if s.choices is not None and not s.many:
        kw["choices"] = s.choices
    p.add_argument(s.flag, required=s.required and with_defaults, **kw)


def _shown(value: Any) -> str:
    if isinstance(value, tuple | list):
        return ",".join(map(str, value))
    return str(value)


def settings_from(args: argparse.Namespace, cls: type, section: str = "") -> dict[str, Any]:
    """The values of `cls`'s settings among the parsed flags, by field name (settings with
    no flag here are left out, to keep their defaults). A setting with its own reading
    (a size, a list) is read here, so a bad value is one line naming the setting."""
    out = {}
    for s in settings_of(cls):
        dest = f"{section}.{s.name}" if section else s.name
        if not hasattr(args, dest):
            continue
        value = getattr(args, dest)
        if s.parse is not None and isinstance(value, str):
            try:
                value = s.parse(value)
            except (ValueError, ClozeError) as err:
                raise SettingError(dest, str(err)) from None
        if s.many and s.choices is not None and value is not None:
            for item in value:
                check_choice(dest, item, s.choices)
        out[s.name] = value
    return out


def flag_of(parser: argparse.ArgumentParser, setting: str) -> str | None:
    """The flag a parser gives the setting (a field name), None if it has none."""
    for action in parser._actions:
        named = [o for o in action.option_strings if not o.startswith("--no-")]
        if action.dest == setting and named:
            return named[0]
    return None
