"""A setting is a typed dataclass field that carries its default, its help and (in a
comment above it) its reason: the one place it is defined. The command line derives its
flags from these fields (clozeworks/commands/flags.py), and a value no run can use is a
`SettingError` naming the field, which the command line says as the flag.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from clozeworks.schemas.errors import SettingError

_NO_DEFAULT: Any = dataclasses.MISSING
# Every seed, in every verb: numpy seeds with a non-negative integer and torch with a signed
# 64-bit one, so both take this range.
SEED_MAX = 2**63 - 1
SEEDS = (0, SEED_MAX)
# Every verb's --seed defaults to this one number, so a build and its stages run one by
# one agree, and a user who sets none gets one seed to remember: the random_seed of BERT's
# create_pretraining_data.py, the family's first reference pipeline.
DEFAULT_SEED = 12345


def setting(
    default: Any = _NO_DEFAULT,
    help: str = "",
    *,
    flag: str | None = None,
    metavar: str | None = None,
    parse: Callable[[str], Any] | None = None,
    default_factory: Callable[[], Any] | None = None,
    bounds: tuple[float, float] | None = None,
) -> Any:
    """A dataclass field that is a user-facing setting. `flag` names its command-line flag
    when that is not the field's name in dashes; `parse` turns the flag's text into the
    value when its type alone cannot (a size such as 500M); `bounds` is the closed range a
    number must lie in (`SEEDS` for a seed), checked by `check_choices`."""
    metadata = {"help": help, "flag": flag, "metavar": metavar, "parse": parse, "bounds": bounds}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Setting:
    """One setting of a settings class, as the command line needs it."""

    name: str
    flag: str
    kind: type  # int, float, str or bool
    optional: bool  # None is a value (the flag may be left out)
    choices: tuple[Any, ...] | None
    default: Any  # dataclasses.MISSING when the setting has none
    help: str
    metavar: str | None
    parse: Callable[[str], Any] | None
    bounds: tuple[float, float] | None = None

    @property
    def required(self) -> bool:
        return self.default is _NO_DEFAULT


def settings_of(cls: type) -> list[Setting]:
    """The settings of dataclass `cls` (its fields made with `setting`), in order."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if "help" not in f.metadata:
            continue
        kind, optional, choices = _kind(hints[f.name])
        default = f.default
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        flag = f.metadata.get("flag") or f.name.replace("_", "-")
        out.append(
            Setting(
                name=f.name,
                flag=f"--{flag}",
                kind=kind,
                optional=optional,
                choices=choices,
                default=default,
                help=f.metadata["help"],
                metavar=f.metadata.get("metavar"),
                parse=f.metadata.get("parse"),
                bounds=f.metadata.get("bounds"),
            )
        )
    return out


def _kind(hint: Any) -> tuple[type, bool, tuple[Any, ...] | None]:
    """(scalar type, None allowed, the Literal's values) of a field's annotation."""
    optional = False
    if get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        optional = len(args) < len(get_args(hint))
        hint = args[0] if len(args) == 1 else str
    if get_origin(hint) is Literal:
        choices = get_args(hint)
        return type(choices[0]), optional, choices
    if get_origin(hint) in (tuple, list, Sequence):
        return str, optional, None  # lists are comma-separated on the command line
    return (hint if isinstance(hint, type) else str), optional, None


def check_choices(obj: Any) -> None:
    """SettingError for a setting of `obj` whose type is a Literal and whose value is not
    one of it, or whose value lies outside its `bounds` (a value set in code or a file,
    which no parser has checked)."""
    for s in settings_of(type(obj)):
        value = getattr(obj, s.name)
        if value is None and s.optional:
            continue
        if s.choices is not None:
            check_choice(s.name, value, s.choices)
        if s.bounds is not None:
            check_between(s.name, value, *s.bounds)


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    if value not in choices:
        raise SettingError(name, f"must be one of {', '.join(map(str, choices))}, got {value}")


def check_at_least(name: str, value: Any, minimum: float) -> None:
    if value < minimum:
        raise SettingError(name, f"must be >= {minimum:g}, got {value}")


def check_between(name: str, value: float, low: float, high: float) -> None:
    """`low <= value <= high`; NaN is never in range."""
    if not low <= value <= high:
        raise SettingError(name, f"must be in [{_number(low)}, {_number(high)}], got {value}")


def _number(x: float) -> str:
    """An integer bound whole (a seed's 2**63 - 1), any other as %g."""
    return str(x) if isinstance(x, int) else f"{x:g}"
