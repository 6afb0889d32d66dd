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
    open_ends: Literal["", "low", "high", "both"] = "",
    at_least: float | None = None,
) -> Any:
    """A dataclass field that is a user-facing setting. `flag` names its command-line flag
    when that is not the field's name in dashes (in a section of settings, only a field
    with a `flag` has one); `parse` turns the flag's text into the value when its type
    alone cannot (a size such as 500M); `bounds` is the range a number must lie in
    (`SEEDS` for a seed), closed but at `open_ends`; `at_least` its least value where it
    has no greatest. Both are checked by `check_choices`."""
    metadata = {
        "help": help,
        "flag": flag,
        "metavar": metavar,
        "parse": parse,
        "bounds": bounds,
        "open_ends": open_ends,
        "at_least": at_least,
    }
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
    open_ends: str = ""
    at_least: float | None = None
    named: bool = False  # its flag is given (`flag=`), not derived from its name
    many: bool = False  # a tuple of `kind` (comma-separated on the command line)

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
        kind, optional, choices, many = _kind(hints[f.name])
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
                open_ends=f.metadata.get("open_ends", ""),
                at_least=f.metadata.get("at_least"),
                named=f.metadata.get("flag") is not None,
                many=many,
            )
        )
    return out


def _kind(hint: Any) -> tuple[type, bool, tuple[Any, ...] | None, bool]:
    """(scalar type, None allowed, the Literal's values, a tuple of them) of a field's
    annotation; a tuple's are its items' (`tuple[Objective, ...]`)."""
    optional = False
    if get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        optional = len(args) < len(get_args(hint))
        hint = args[0] if len(args) == 1 else str
    many = get_origin(hint) in (tuple, list, Sequence)
    if many:
        hint = get_args(hint)[0] if get_args(hint) else str
    if get_origin(hint) is Literal:
        choices = get_args(hint)
        return type(choices[0]), optional, choices, many
    return (hint if isinstance(hint, type) else str), optional, None, many


def check_choices(obj: Any, section: str = "") -> None:
    """SettingError for a setting of `obj` whose value is not of its type, whose type is a
    Literal and whose value is not one of it, or whose value lies outside its `bounds` or
    below its `at_least` (a value set in code or a file, which no parser has checked).
    `section` prefixes the names (`model.num_heads`)."""
    for s in settings_of(type(obj)):
        name = f"{section}.{s.name}" if section else s.name
        value = getattr(obj, s.name)
        if value is None and s.optional:
            continue
        for item in value if s.many and isinstance(value, tuple | list) else (value,):
            check_type(name, item, s.kind)
            if s.choices is not None:
                check_choice(name, item, s.choices)
        if s.bounds is not None:
            check_between(name, value, *s.bounds, open_ends=s.open_ends)
        if s.at_least is not None:
            check_at_least(name, value, s.at_least)


_TYPE_NAMES = {int: "int", float: "float", bool: "bool", str: "str"}


def check_type(name: str, value: Any, kind: type) -> None:
    """`value` is a `kind` (an int passes for a float; a bool for nothing but a bool), so a
    slip in a file (`hidden_size = "768"`, `dropout = true`) is named, not met deep inside."""
    accepted = (int, float) if kind is float else kind
    if kind in _TYPE_NAMES and (
        not isinstance(value, accepted) or (isinstance(value, bool) and kind is not bool)
    ):
        raise SettingError(name, f"must be {_TYPE_NAMES[kind]}, got {value!r}")


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    if value not in choices:
        raise SettingError(name, f"must be one of {', '.join(map(str, choices))}, got {value}")


def check_at_least(name: str, value: Any, minimum: float) -> None:
    if not value >= minimum:  # NaN is below every minimum
        raise SettingError(name, f"must be >= {minimum:g}, got {value}")


def check_between(name: str, value: float, low: float, high: float, open_ends: str = "") -> None:
    """`low <= value <= high`, strict at `open_ends` ("low", "high" or "both"); NaN is
    never in range."""
    low_open = open_ends in ("low", "both")
    high_open = open_ends in ("high", "both")
    above = value > low if low_open else value >= low
    below = value < high if high_open else value <= high
    if not (above and below):
        interval = f"{'(' if low_open else '['}{_number(low)}, {_number(high)}"
        raise SettingError(name, f"must be in {interval}{')' if high_open else ']'}, got {value}")


def _number(x: float) -> str:
    """A seed's bound as people write it, any other integer whole, the rest as %g."""
    if x == SEED_MAX:
        return "2**63 - 1"
    return str(x) if isinstance(x, int) else f"{x:g}"
