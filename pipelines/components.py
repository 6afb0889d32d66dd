"""Connected components inside Beam: alternating large-star / small-star rounds
(corpus.dedup.components), then a check that every component has become a star.

Each round is two GroupByKeys over the edges, keyed by node: a worker only ever holds one
node's neighbourhood, never the whole graph. Beam pipelines cannot loop until a condition
holds, so `rounds` rounds are unrolled and `SettleCheck` counts nodes that are not yet in
their final star (`cc.unsettled`); the caller runs more rounds on its output while that
counter is not zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.coders import StrUtf8Coder

from clozeworks.corpus.dedup.components import Edge, large_star, orient, settled, small_star
from clozeworks.pipelines.plumbing.counters import counter
from clozeworks.pipelines.plumbing.shuffle import Shuffle

NODE = StrUtf8Coder()


def _both_ways(edge: Edge) -> Iterator[Edge]:
    yield edge
    yield edge[1], edge[0]


def _large_star(item: tuple[str, Iterable[str]]) -> list[Edge]:
    return large_star(item[0], item[1])


def _small_star(item: tuple[str, Iterable[str]]) -> list[Edge]:
    return small_star(item[0], item[1])


class StarRound(beam.PTransform):
    """Edges -> edges of the same components, one large-star and one small-star step closer
    to a star per component."""

    def __init__(self, shuffle: Shuffle, name: str) -> None:
        super().__init__()
        self.shuffle = shuffle
        self.name = name

    def expand(self, edges: Any) -> Any:
        return (
            edges
            | "BothWays" >> beam.FlatMap(_both_ways)
            | "NeighboursOfNode" >> self.shuffle.group_by_key(f"{self.name}-large", NODE, NODE)
            | "LargeStar" >> beam.FlatMap(_large_star)
            | "LargerFirst" >> beam.Map(orient)
            | "SmallerNeighbours" >> self.shuffle.group_by_key(f"{self.name}-small", NODE, NODE)
            | "SmallStar" >> beam.FlatMap(_small_star)
        )


def _as_child(edge: Edge) -> Edge:
    return edge


def _as_parent(edge: Edge) -> Edge:
    return edge[1], edge[0]


def _settle(item: tuple[str, dict[str, Iterable[str]]]) -> Iterator[Edge]:
    node, links = item
    parents = sorted(set(links["parents"]))
    if not settled(parents, list(links["children"])[:1]):
        counter("cc.unsettled").inc()
    for parent in parents:
        yield node, parent


class SettleCheck(beam.PTransform):
    """Edges -> the same edges without repeats, counting nodes not yet in final star form."""

    def __init__(self, shuffle: Shuffle) -> None:
        super().__init__()
        self.shuffle = shuffle

    def expand(self, edges: Any) -> Any:
        links = {"children": NODE, "parents": NODE}
        return (
            {
                "parents": edges | "ByChild" >> beam.Map(_as_child),
                "children": edges | "ByParent" >> beam.Map(_as_parent),
            }
            | "LinksOfNode" >> self.shuffle.co_group_by_key("cc-settle", NODE, links)
            | "CheckStars" >> beam.FlatMap(_settle)
        )


class ConnectedComponents(beam.PTransform):
    """(child, parent) edges -> (node, smallest node of its component) for every non-smallest
    node, once `cc.unsettled` is zero; otherwise the state to continue from."""

    def __init__(self, rounds: int, shuffle: Shuffle | None = None) -> None:
        super().__init__()
        if rounds < 1:
            raise ValueError(f"rounds must be >= 1, got {rounds}")
        self.rounds = rounds
        self.shuffle = shuffle or Shuffle()

    def expand(self, edges: Any) -> Any:
        for i in range(1, self.rounds + 1):
            edges = edges | f"Round{i}" >> StarRound(self.shuffle, f"cc-round{i}")
        return edges | "Settle" >> SettleCheck(self.shuffle)
