"""Large-star / small-star rounds find the same components as union-find."""

import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from clozeworks.corpus.dedup.components import (
    bucket_edges,
    components,
    large_star,
    orient,
    settled,
    small_star,
)


def run_rounds(edges, max_rounds=64):
    """The MapReduce data flow of the pipeline, in memory: group, reduce, repeat."""
    for rounds in range(1, max_rounds + 1):
        by_node = {}
        for a, b in edges:
            by_node.setdefault(a, set()).add(b)
            by_node.setdefault(b, set()).add(a)
        edges = [e for node, nbrs in by_node.items() for e in large_star(node, nbrs)]
        by_node = {}
        for e in edges:
            big, small = orient(e)
            by_node.setdefault(big, set()).add(small)
        edges = [e for node, nbrs in by_node.items() for e in small_star(node, nbrs)]
        parents, children = {}, {}
        for child, parent in edges:
            parents.setdefault(child, []).append(parent)
            children.setdefault(parent, []).append(child)
        nodes = set(parents) | set(children)
        if all(settled(parents.get(n, []), children.get(n, [])) for n in nodes):
            return {child: p[0] for child, p in parents.items()}, rounds
    raise AssertionError("did not converge")


def test_bucket_edges() -> None:
    assert bucket_edges(["c", "a", "b", "a"]) == [("b", "a"), ("c", "a")]
    assert bucket_edges(["c", "a", "b"], all_pairs_up_to=3) == [("b", "a"), ("c", "a"), ("c", "b")]
    assert bucket_edges(["x"]) == []


def test_chains_merge_into_one_component() -> None:
    # a~b and b~c, never a~c: still one cluster, kept document "a".
    assignment, _ = run_rounds([("b", "a"), ("c", "b")])
    assert assignment == {"b": "a", "c": "a"}


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=80))
def test_rounds_agree_with_union_find(pairs) -> None:
    edges = [(f"d{a:03d}", f"d{b:03d}") for a, b in pairs if a != b]
    if not edges:
        return
    assignment, _ = run_rounds(edges)
    expected = {n: r for n, r in components(edges).items() if n != r}
    assert assignment == expected


def test_long_paths_converge_in_few_rounds() -> None:
    labels = [f"{i:05d}" for i in range(2000)]
    random.Random(3).shuffle(labels)
    edges = list(itertools.pairwise(labels))
    assignment, rounds = run_rounds(edges)
    assert set(assignment.values()) == {"00000"} and len(assignment) == 1999
    assert rounds <= 12
