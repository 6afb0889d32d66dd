"""The input files' fates beyond their records: the format each is read as (placed on the
launching machine, before any worker meets it), and those left out, unknown or damaged, by
name for `.stats.json`."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam

from clozeworks.corpus.text.placing import UNKNOWN_FORMAT, FormatRule, place
from clozeworks.pipelines.plumbing.beamfs import BEAM_FS
from clozeworks.pipelines.read_raw import READ_ERRORS, skipped_inputs
from clozeworks.schemas.errors import BadInputError

# Input files left out because their bytes are damaged (--on-bad-file skip).
DAMAGED = "damaged"
_BAD_FILES_DIR = "_bad_files"
# Skipped input files named in .stats.json, per reason (the count is always whole).
SKIPPED_SHOWN = 20


@dataclass
class Placed:
    """Every input file read as a format: (path, name, format), and those left out by
    reason (UNKNOWN_FORMAT, DAMAGED), each (path, what is wrong)."""

    files: list[tuple[str, str, str]] = field(default_factory=list)
    left_out: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    @property
    def formats(self) -> dict[str, int]:
        """How many files are read as each format."""
        counts: dict[str, int] = {}
        for _, _, fmt in self.files:
            counts[fmt] = counts.get(fmt, 0) + 1
        return dict(sorted(counts.items()))


def place_inputs(
    named: Sequence[tuple[str, str]], rules: Sequence[FormatRule], skip_damaged: bool
) -> Placed:
    """Each of `named` (path, name) placed by `rules` for its name, then its file name, then
    its first bytes (corpus/text/placing.py). A file whose first bytes cannot be read is
    one line naming it, or with `skip_damaged` left out as DAMAGED."""
    placed = Placed()
    for path, name in named:
        try:
            fmt = place(path, name, rules, BEAM_FS.open)
        except (BadInputError, *READ_ERRORS) as err:
            message = str(err) if isinstance(err, BadInputError) else f"{path}: cannot read ({err})"
            if not skip_damaged:
                raise BadInputError(message) from None
            placed.left_out.setdefault(DAMAGED, []).append((path, message))
            continue
        if fmt is None:
            why = f"{path}: no reader knows this format (name it with --format PATTERN:FORMAT)"
            placed.left_out.setdefault(UNKNOWN_FORMAT, []).append((path, why))
        else:
            placed.files.append((path, name, fmt))
    return placed


def nothing_readable(placed: Placed) -> str:
    """The one line for inputs none of which can be read."""
    first = next(why for items in placed.left_out.values() for _, why in items)
    count = sum(len(items) for items in placed.left_out.values())
    return f"none of the {count} input file(s) can be read; the first: {first}"


def skipped_report(
    patterns: Sequence[str], left_out: dict[str, list[tuple[str, str]]]
) -> dict[str, dict[str, Any]]:
    """`.stats.json`'s `skipped_files`: by reason, how many files and the first few."""
    named = {reason: [(p, "") for p in paths] for reason, paths in skipped_inputs(patterns).items()}
    out = {}
    for reason, items in sorted({**named, **left_out}.items()):
        entry: dict[str, Any] = {
            "count": len(items),
            "first": [p for p, _ in items][:SKIPPED_SHOWN],
        }
        if any(why for _, why in items):
            entry["errors"] = [why for _, why in items][:SKIPPED_SHOWN]
        out[reason] = entry
    return out


def _as_line(item: tuple[str, str]) -> str:
    return json.dumps({"path": item[0], "error": item[1]}, ensure_ascii=False)


class WriteBadFiles(beam.PTransform):
    """(path, what is wrong) of damaged files -> JSON lines in `staging`'s `_bad_files`
    (`read_bad_files` reads them back once the pipeline is done)."""

    def __init__(self, staging: str) -> None:
        super().__init__()
        self.prefix = BEAM_FS.join(staging, _BAD_FILES_DIR, "part")

    def expand(self, bad: Any) -> Any:
        return (
            bad
            | "AsJson" >> beam.Map(_as_line)
            | "Write" >> beam.io.WriteToText(self.prefix, file_name_suffix=".jsonl")
        )


def read_bad_files(staging: str) -> list[tuple[str, str]]:
    """The damaged files `WriteBadFiles` wrote to `staging`, each once (a file read in
    ranges may be found damaged by several), sorted by path; the files are removed."""
    directory = BEAM_FS.join(staging, _BAD_FILES_DIR)
    found: dict[str, str] = {}
    for path in BEAM_FS.match(BEAM_FS.join(directory, "part*")):
        with BEAM_FS.open(path) as f:
            for line in _lines(f.read()):
                record = json.loads(line)
                found.setdefault(record["path"], record["error"])
    BEAM_FS.remove_tree(directory)
    return sorted(found.items())


def _lines(data: bytes) -> Iterator[str]:
    return (line for line in data.decode("utf-8").splitlines() if line)
