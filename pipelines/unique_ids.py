"""One document per id when ids come from the input (`cloze clean --id-field`).

Ids from the input are the user's, so nothing makes them unique, and every later stage
keys on them (dedup's clusters, the shard order): two documents with id `a` would both be
kept, and which one a cluster or a shard saw first would depend on the runner. Rows are
grouped by id through the pipeline's Shuffle (files on one machine, Beam's shuffle on a
cluster); of each group the row whose (source, text, meta) sorts first is kept, the same
choice on every runner, and the others are dropped as `duplicate_id`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.coders import FastPrimitivesCoder, StrUtf8Coder

from clozeworks.corpus.text.readers import RawDocument
from clozeworks.pipelines.plumbing.counters import counter, utf8_bytes
from clozeworks.pipelines.plumbing.shuffle import Shuffle

DROPPED = "dropped"
REASON = "duplicate_id"
_ID = StrUtf8Coder()
_ROW = FastPrimitivesCoder()  # a dict of strings, written without pickling


def _by_id(row: dict[str, str]) -> tuple[str, dict[str, str]]:
    return row["id"], row


def _order(row: dict[str, str]) -> tuple[str, str, str]:
    return row["source"], row["text"], row["meta"]


class _KeepOne(beam.DoFn):
    def __init__(self, counted_out: bool) -> None:
        self.dropped = counter(f"dropped.{REASON}")
        # In clean, counted as kept when they passed the filters: uncounted here.
        self.counted_out = counted_out
        self.kept = counter("documents_out")
        self.bytes_out = counter("bytes_out")

    def process(self, item: tuple[str, Iterable[dict[str, str]]]) -> Iterator[Any]:
        _, rows = item
        first, *others = sorted(rows, key=_order)
        yield first
        for row in others:
            self.dropped.inc()
            if self.counted_out:
                self.kept.dec()
                self.bytes_out.dec(utf8_bytes(row["text"]))
            doc = RawDocument(row["id"], row["text"], row["source"], row["meta"])
            yield beam.pvalue.TaggedOutput(DROPPED, (REASON, doc))


class UniqueIds(beam.PTransform):
    """Document rows -> one row per id (main, `kept`) and (reason, RawDocument) for the
    others (tagged `dropped`). `counted_out`: the rows were counted in `documents_out`
    already (clean counts what passed its filters), so a dropped one is taken off again."""

    def __init__(self, shuffle: Shuffle, counted_out: bool = True) -> None:
        super().__init__()
        self.shuffle = shuffle
        self.counted_out = counted_out

    def expand(self, rows: Any) -> Any:
        return (
            rows
            | "KeyById" >> beam.Map(_by_id)
            | "GroupById" >> self.shuffle.group_by_key("ids", _ID, _ROW)
            | "KeepOnePerId"
            >> beam.ParDo(_KeepOne(self.counted_out)).with_outputs(DROPPED, main="kept")
        )
