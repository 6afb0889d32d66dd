"""Languages and scripts of a document store: the languages its clean stage identified (or
the documents declared), with the documents and bytes of each, a warning where they are not
the ones asked for, and the main script of every document counted from the text itself.

Mojibake shows here first: Korean pages decoded as something else are identified as Greek or
Thai and their main script is not Hangul."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from clozeworks.corpus.text.filters.languages import UNDETERMINED
from clozeworks.corpus.vocab.scripts import main_scripts

# Documents without a letter (numbers, punctuation only).
NO_LETTERS = "none"
# Languages other than the ones asked for are worth a word from this share of documents.
OTHER_LANGUAGES_WARN = 0.01


class ScriptTally:
    """Documents and UTF-8 bytes by each document's main script."""

    def __init__(self) -> None:
        self.figures: dict[str, list[int]] = {}

    def add(self, texts: Iterable[str]) -> None:
        texts = list(texts)
        for text, script in zip(texts, main_scripts(texts), strict=True):
            figures = self.figures.setdefault(script or NO_LETTERS, [0, 0])
            figures[0] += 1
            figures[1] += len(text.encode("utf-8", "surrogatepass"))

    def summary(self) -> dict[str, dict[str, int]]:
        """By script, most bytes first."""
        ranked = sorted(self.figures.items(), key=lambda kv: (-kv[1][1], kv[0]))
        return {script: {"documents": d, "bytes": b} for script, (d, b) in ranked}


def stage_records(stats: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A store's .stats.json record, then its upstreams' (dedup nests clean's, or several
    cleans' in order under `upstreams`), at most 64."""
    found: list[dict[str, Any]] = []
    todo: list[Any] = [stats]
    while todo and len(found) < 64:
        item = todo.pop(0)
        if not isinstance(item, dict):
            continue
        found.append(item)
        several = item.get("upstreams")
        todo += several if isinstance(several, list) else [item.get("upstream")]
    return found


def _clean_stages(stats: dict[str, Any] | None) -> list[dict[str, Any]]:
    return [s for s in stage_records(stats) if s.get("stage") == "clean"]


def identified_languages(stats: dict[str, Any] | None) -> dict[str, dict[str, int]]:
    """Per language code, the documents its clean stages filtered and their bytes (0 where
    a store predates the count), most documents first."""
    totals: dict[str, list[int]] = {}
    for stage in _clean_stages(stats):
        languages = stage.get("languages")
        for code, entry in (languages if isinstance(languages, dict) else {}).items():
            if isinstance(entry, dict):
                figures = totals.setdefault(str(code), [0, 0])
                figures[0] += _int(entry.get("documents"))
                figures[1] += _int(entry.get("bytes"))
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1][0], kv[0]))
    return {code: {"documents": d, "bytes": b} for code, (d, b) in ranked}


def asked_languages(stats: dict[str, Any] | None) -> list[str]:
    """The languages a clean stage was asked for: `--language` and the language filter's
    `--language-languages`."""
    asked: set[str] = set()
    for stage in _clean_stages(stats):
        if isinstance(stage.get("language"), str) and stage["language"]:
            asked.add(stage["language"])
        settings = (stage.get("filters") or {}).get("language")
        if isinstance(settings, dict) and isinstance(settings.get("languages"), str):
            asked.update(c.strip() for c in settings["languages"].split(",") if c.strip())
    return sorted(asked)


def language_warnings(languages: dict[str, dict[str, int]], asked: list[str]) -> list[str]:
    """One line where documents were identified as languages not asked for."""
    total = sum(entry["documents"] for entry in languages.values())
    if not asked or not total:
        return []
    other = {
        code: e["documents"]
        for code, e in languages.items()
        if code not in asked and code != UNDETERMINED
    }
    count = sum(other.values())
    if count < OTHER_LANGUAGES_WARN * total:
        return []
    shown = ", ".join(f"{code} {n}" for code, n in list(other.items())[:5])
    return [
        f"{count} of {total} documents were identified as languages not asked for "
        f"({', '.join(asked)}): {shown}; another language, or text decoded wrongly (mojibake)?"
    ]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# Tokens that decode to part of a character (byte-level pieces of one).
PARTIAL = "partial"


def token_scripts(
    tokenizer: Tokenizer, counts: np.ndarray, special_ids: Iterable[int]
) -> dict[str, dict[str, Any]]:
    """How many of the tokens counted (`counts`, by id) are of each script, by what each id
    decodes to alone: a word piece's letters (`##` and `▁` markers dropped by the decoder),
    PARTIAL for a byte-level piece of a character, NO_LETTERS for digits and punctuation.
    Special tokens are left out; most tokens first, with their share."""
    counts = np.asarray(counts, dtype=np.int64).copy()
    counts[[i for i in special_ids if 0 <= i < len(counts)]] = 0
    used = np.flatnonzero(counts)
    texts = tokenizer.decode_batch([[int(i)] for i in used], skip_special_tokens=False)
    totals: dict[str, int] = {}
    scripts = main_scripts(texts)
    for token_id, text, script in zip(used.tolist(), texts, scripts, strict=True):
        named = PARTIAL if "\ufffd" in text else script or NO_LETTERS
        totals[named] = totals.get(named, 0) + int(counts[token_id])
    total = sum(totals.values())
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))
    return {script: {"tokens": n, "share": n / total} for script, n in ranked}
