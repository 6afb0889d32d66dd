"""Connected components of the duplicate graph, as reducer steps for a MapReduce-style
runner: the large-star and small-star operations of Kiveris et al. 2014, "Connected
Components in MapReduce and Beyond" (SoCC '14).

Edges are (child, parent) pairs of document ids. Each step sees one node and its neighbours
and emits edges; alternating them converges, in O(log^2 n) rounds, to one star per
component whose centre is the component's smallest id — the document dedup keeps. No step
needs more than one node's neighbourhood, so no worker ever sees the whole graph.
`settled` says whether a node's edges are already in that final form; `components` is the
plain union-find answer the tests and benchmarks compare against.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Edge = tuple[str, str]


def bucket_edges(ids: Iterable[str], all_pairs_up_to: int = 0) -> list[Edge]:
    """Edges that connect the members of one LSH bucket (or one exact-duplicate group).

    A star around the smallest id connects them all with n-1 edges; when candidates are
    verified pairwise, buckets of at most `all_pairs_up_to` members give every pair instead,
    so one dissimilar member cannot cut the others apart.
    """
    members = sorted(set(ids))
    if len(members) < 2:
        return []
    if len(members) <= all_pairs_up_to:
        return [(b, a) for i, a in enumerate(members) for b in members[i + 1 :]]
    root = members[0]
    return [(m, root) for m in members[1:]]


def large_star(node: str, neighbours: Iterable[str]) -> list[Edge]:
    """Connect every larger neighbour of `node` to the smallest of node and its neighbours."""
    seen = set(neighbours)
    smallest = min(seen | {node})
    return [(v, smallest) for v in seen if v > node]


def small_star(node: str, smaller: Iterable[str]) -> list[Edge]:
    """`smaller`: neighbours of `node` not above it. Connect them and the node to their
    smallest."""
    group = set(smaller) | {node}
    smallest = min(group)
    return [(v, smallest) for v in group if v != smallest]


def orient(edge: Edge) -> Edge:
    """(larger, smaller) — the key small-star groups by."""
    a, b = edge
    return (a, b) if a > b else (b, a)


def settled(parents: Sequence[str], children: Sequence[str]) -> bool:
    """Whether a node is done: it has at most one parent, and a node with a parent has no
    children (so every component is a star around its smallest id)."""
    return len(set(parents)) <= 1 and not (parents and children)


def components(edges: Iterable[Edge]) -> dict[str, str]:
    """node -> smallest node of its component, for every node on an edge (union-find)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        root = x
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {node: find(node) for node in list(parent)}
