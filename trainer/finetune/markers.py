"""Entity markers in a sentence (relation extraction, KLUE-RE): the subject and the object
between `<subj> </subj>` and `<obj> </obj>`, as KLUE-baseline's `_mark_entity_spans`
writes them. A record's entities are objects with `start_idx` and `end_idx` (inclusive
character offsets into the sentence) and `word` (the text there, checked)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

# Subject, then object: the start and end markers of each (KLUE-baseline's).
MARKERS = (("<subj>", "</subj>"), ("<obj>", "</obj>"))


class SpanError(ValueError):
    """An entity whose offsets do not fit its sentence or its word."""


def _span(entity: Any, name: str, text: str) -> tuple[int, int]:
    if not isinstance(entity, dict):
        raise SpanError(f"{name} is not an object with start_idx and end_idx")
    start, end = entity.get("start_idx"), entity.get("end_idx")
    if not isinstance(start, int) or not isinstance(end, int) or not 0 <= start <= end < len(text):
        raise SpanError(f"{name} span {start!r}-{end!r} is not inside the sentence")
    word = entity.get("word")
    if word is not None and text[start : end + 1] != word:
        raise SpanError(
            f"{name} span {start}-{end} reads {text[start : end + 1]!r}, its word is {word!r}"
        )
    return start, end


def mark(text: str, entities: Sequence[Any], names: Sequence[str]) -> str:
    """`text` with each entity between its markers."""
    spans = [(*_span(e, n, text), m) for e, n, m in zip(entities, names, MARKERS, strict=True)]
    spans.sort()
    for (_, end, _), (start, _, _) in itertools.pairwise(spans):
        if start <= end:
            raise SpanError(f"the spans of {' and '.join(names)} overlap")
    out, at = [], 0
    for start, end, (opening, closing) in spans:
        out += [text[at:start], opening, text[start : end + 1], closing]
        at = end + 1
    return "".join([*out, text[at:]])
