"""Which fields of a raw record hold what: the text and id fields per input file, and the
fields carried into a document's `meta`.

A corpus often mixes sources whose records name their text differently (`text` in one,
`content` in another); a rule says, for the files whose source (the path from the input's
own name, as in ids: `raw/web/a.jsonl`) matches a pattern, which field is which. The first
rule that matches a file wins; a file no rule matches takes `--text-field` / `--id-field`.
"""

from __future__ import annotations

import datetime
import decimal
import fnmatch
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Keys a rule may set, and what each is.
RULE_KEYS = {"text": "the field holding the text", "id": "the field holding the id"}


@dataclass(frozen=True)
class FieldRule:
    """For the files whose source matches `pattern` (fnmatch; `*` crosses `/`), the text
    field and the id field (None: the one given for every file)."""

    pattern: str
    text: str | None = None
    id: str | None = None

    def matches(self, source: str) -> bool:
        return fnmatch.fnmatchcase(source, self.pattern)

    def to_text(self) -> str:
        keys = [f"{k}={getattr(self, k)}" for k in RULE_KEYS if getattr(self, k) is not None]
        return f"{self.pattern}:{','.join(keys)}"


def parse_field_rules(text: str) -> tuple[FieldRule, ...]:
    """`PATTERN:text=FIELD,id=FIELD` rules separated by `;`. ValueError naming the rule
    that is not one."""
    rules = []
    for item in (part.strip() for part in text.split(";")):
        if not item:
            continue
        pattern, colon, spec = item.rpartition(":")
        if not colon or not pattern:
            raise ValueError(f"{item!r}: a rule is PATTERN:text=FIELD[,id=FIELD]")
        values: dict[str, str] = {}
        for pair in spec.split(","):
            key, equals, value = (p.strip() for p in pair.partition("="))
            if key not in RULE_KEYS or not equals or not value:
                keys = ", ".join(RULE_KEYS)
                raise ValueError(
                    f"{item!r}: {pair.strip()!r} is not KEY=FIELD with KEY one of {keys}"
                )
            if key in values:
                raise ValueError(f"{item!r}: {key} is given twice")
            values[key] = value
        rules.append(FieldRule(pattern, **values))
    return tuple(rules)


def rule_for(rules: Sequence[FieldRule], source: str) -> FieldRule | None:
    """The first rule that matches `source`, None when none does."""
    return next((r for r in rules if r.matches(source)), None)


def parse_names(text: str) -> tuple[str, ...]:
    """A comma-separated list of field names, in order, each once."""
    return tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))


def meta_of(record: Mapping[str, Any], fields: Sequence[str]) -> str:
    """The `fields` a record has, as the JSON object a document's `meta` holds (keys in the
    order asked; a value JSON cannot hold, a date or a decimal, as its text). A field the
    record lacks is left out, not null: absence and null differ in the source."""
    picked = {f: record[f] for f in fields if f in record}
    if not picked:
        return "{}"
    return json.dumps(picked, ensure_ascii=False, separators=(",", ":"), default=_plain)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime.date | datetime.time | decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    raise TypeError(f"a {type(value).__name__} cannot be kept in meta")
