"""Duplicate-graph edges for `cloze dedup`: exact groups, MinHash LSH candidates and their
optional verification by true Jaccard similarity. The graph goes to ConnectedComponents.

Only ids, band keys and (when verifying) shingle sets are shuffled, never document text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.coders import BytesCoder, StrUtf8Coder, TupleCoder

from clozeworks.corpus.dedup.components import Edge, bucket_edges
from clozeworks.corpus.dedup.exact import exact_key
from clozeworks.corpus.dedup.minhash import MinHasher, Shingler, band_keys, jaccard
from clozeworks.pipelines.plumbing.counters import counter
from clozeworks.pipelines.plumbing.shuffle import Shuffle

ID = StrUtf8Coder()
EDGE = TupleCoder([ID, ID])

SHINGLES = "shingles"
# Verified buckets of at most this many members get all their pairs checked, so one odd
# member cannot split the rest; larger ones (near-identical boilerplate) get a star.
ALL_PAIRS_UP_TO = 16


@dataclass(frozen=True)
class NearSettings:
    threshold: float = 0.8
    ngram: int = 5
    num_perm: int = 256
    bands: int = 17
    rows: int = 15
    seed: int = 42
    verify: bool = False


def _key_by_text(row: dict[str, Any]) -> tuple[str, str]:
    return exact_key(row["text"]), row["id"]


def _exact_group_edges(item: tuple[str, Iterable[str]]) -> list[Edge]:
    edges = bucket_edges(item[1])
    if edges:
        counter("duplicates.exact").inc(len(edges))
        counter("clusters.exact").inc()
    return edges


class ExactEdges(beam.PTransform):
    """Document rows -> a star of edges around the smallest id of each group of equal texts
    (equal after case folding and whitespace collapsing, see corpus.dedup.exact.exact_key)."""

    def __init__(self, shuffle: Shuffle | None = None) -> None:
        super().__init__()
        self.shuffle = shuffle or Shuffle()

    def expand(self, rows: Any) -> Any:
        return (
            rows
            | "KeyByTextHash" >> beam.Map(_key_by_text)
            | "GroupCopies" >> self.shuffle.group_by_key("exact", ID, ID)
            | "StarAroundSmallestId" >> beam.FlatMap(_exact_group_edges)
        )


class _BandKeys(beam.DoFn):
    def __init__(self, settings: NearSettings) -> None:
        self.settings = settings

    def setup(self) -> None:
        self.shingler = Shingler(self.settings.ngram)
        self.hasher = MinHasher(self.settings.num_perm, self.settings.seed)

    def process(self, row: dict[str, Any]) -> Iterator[Any]:
        shingles = self.shingler(row["text"])
        if len(shingles) == 0:
            counter("near.no_words").inc()
            return
        counter("near.signatures").inc()
        signature = self.hasher.signature(shingles)
        yield band_keys(signature, self.settings.bands, self.settings.rows), row["id"]
        if self.settings.verify:
            yield beam.pvalue.TaggedOutput(SHINGLES, (row["id"], shingles.tobytes()))


class _BucketEdges(beam.DoFn):
    def __init__(self, all_pairs_up_to: int) -> None:
        self.all_pairs_up_to = all_pairs_up_to

    def process(self, item: tuple[bytes, Iterable[str]]) -> Iterator[Edge]:
        edges = bucket_edges(item[1], self.all_pairs_up_to)
        if edges:
            counter("near.candidate_buckets").inc()
            yield from edges


class CandidateEdges(beam.PTransform):
    """Document rows -> edges between documents sharing a MinHash band (main output), and
    (id, shingle bytes) tagged `shingles` when the settings ask for verification."""

    def __init__(self, settings: NearSettings, shuffle: Shuffle | None = None) -> None:
        super().__init__()
        self.settings = settings
        self.shuffle = shuffle or Shuffle()

    def expand(self, rows: Any) -> Any:
        keyed = rows | "BandKeys" >> beam.ParDo(_BandKeys(self.settings)).with_outputs(
            SHINGLES, main="bands"
        )
        pairs_up_to = ALL_PAIRS_UP_TO if self.settings.verify else 0
        edges = (
            keyed.bands
            # One group per band value that documents collide in.
            | "Buckets" >> self.shuffle.collisions("bands", BytesCoder(), ID)
            | "EdgesInBucket" >> beam.ParDo(_BucketEdges(pairs_up_to))
        )
        return edges, keyed[SHINGLES]


def _pair_as_key(edge: Edge) -> tuple[Edge, bytes]:
    return edge, b""


def _key_of(item: tuple[Edge, Any]) -> Edge:
    return item[0]


def _by_parent(edge: Edge) -> tuple[str, str]:
    return edge[1], edge[0]


def _send_shingles(item: tuple[str, dict[str, Iterable[Any]]]) -> Iterator[Any]:
    """At document a: (b, (a, shingles of a)) for every candidate pair (b, a)."""
    _, joined = item
    shingles = next(iter(joined["shingles"]), None)
    if shingles is None:
        return
    for other in sorted(set(joined["pairs"])):
        yield other, (item[0], shingles)


class _Compare(beam.DoFn):
    def __init__(self, threshold: float) -> None:
        self.threshold = threshold

    def process(self, item: tuple[str, dict[str, Iterable[Any]]]) -> Iterator[Edge]:
        node, joined = item
        mine = next(iter(joined["shingles"]), None)
        if mine is None:
            return
        ours = np.frombuffer(mine, dtype=np.uint64)
        for other, theirs in joined["probes"]:
            counter("near.pairs_checked").inc()
            if jaccard(ours, np.frombuffer(theirs, dtype=np.uint64)) >= self.threshold:
                yield node, other
            else:
                counter("near.pairs_rejected").inc()


class VerifyPairs(beam.PTransform):
    """Candidate edges -> the edges whose documents' true Jaccard similarity is at least the
    threshold. Two joins by id bring both shingle sets of a pair to one worker."""

    def __init__(self, threshold: float, shuffle: Shuffle | None = None) -> None:
        super().__init__()
        self.threshold = threshold
        self.shuffle = shuffle or Shuffle()

    def expand(self, inputs: Any) -> Any:
        candidates, shingles = inputs
        pairs = (
            candidates
            | "PairAsKey" >> beam.Map(_pair_as_key)
            | "GroupPairs" >> self.shuffle.group_by_key("pairs", EDGE, BytesCoder())
            | "OnePerPair" >> beam.Map(_key_of)
        )
        first = {"pairs": ID, "shingles": BytesCoder()}
        probes = (
            {"pairs": pairs | "ByParent" >> beam.Map(_by_parent), "shingles": shingles}
            | "JoinFirst" >> self.shuffle.co_group_by_key("verify-first", ID, first)
            | "SendShingles" >> beam.FlatMap(_send_shingles)
        )
        second = {"probes": TupleCoder([ID, BytesCoder()]), "shingles": BytesCoder()}
        return (
            {"probes": probes, "shingles": shingles}
            | "JoinSecond" >> self.shuffle.co_group_by_key("verify-second", ID, second)
            | "CompareShingles" >> beam.ParDo(_Compare(self.threshold))
        )
