import random
from pathlib import Path

import apache_beam as beam
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from clozeworks.corpus.dedup.components import components
from clozeworks.corpus.dedup.minhash import Shingler, jaccard
from clozeworks.pipelines.clean import CleanConfig, run_clean
from clozeworks.pipelines.components import ConnectedComponents
from clozeworks.pipelines.dedup import ApplyClusters, DedupConfig, run_dedup
from clozeworks.pipelines.near_dedup import ExactEdges
from clozeworks.pipelines.plumbing.runner import LocalRunner
from clozeworks.schemas.errors import BadInputError, UsageError
from tests.conftest import write_jsonl

VOCAB = [f"w{i}" for i in range(3000)]


def row(doc_id: str, text: str) -> dict[str, str]:
    return {"id": doc_id, "text": text, "source": "s", "meta": "{}"}


def _id(r):
    return r["id"]


def kept_ids(directory: Path) -> list[str]:
    ids = []
    for f in sorted(directory.glob("part-*.parquet")):
        ids.extend(pq.read_table(f, columns=["id"]).column("id").to_pylist())
    return sorted(ids)


def clusters_of(directory: Path) -> dict[str, str]:
    out = {}
    for f in sorted(directory.glob("clusters-*.parquet")):
        out.update((r["id"], r["cluster"]) for r in pq.read_table(f).to_pylist())
    return out


def accounted(stats: dict) -> bool:
    dropped = sum(v for k, v in stats.items() if k.startswith("dropped."))
    return stats["documents_in"] == stats["documents_out"] + stats["duplicates"] + dropped


def test_exact_duplicates_keep_the_smallest_id() -> None:
    rows = [
        row("b", "Same text"),
        row("a", "same   TEXT"),
        row("c", "other"),
        row("d", "same text"),
    ]
    with TestPipeline(runner=LocalRunner()) as p:
        docs = p | beam.Create(rows)
        edges = docs | ExactEdges() | ConnectedComponents(2)
        kept = (docs, edges) | ApplyClusters() | beam.Map(_id)
        assert_that(kept, equal_to(["a", "c"]))


def test_components_transform_merges_chains_and_matches_union_find() -> None:
    rng = random.Random(5)
    nodes = [f"n{i:03d}" for i in range(120)]
    edges = [(rng.choice(nodes), rng.choice(nodes)) for _ in range(90)]
    edges = [e for e in edges if e[0] != e[1]] + [("b", "a"), ("c", "b")]
    expected = sorted((n, r) for n, r in components(edges).items() if n != r)
    with TestPipeline(runner=LocalRunner()) as p:
        out = p | beam.Create(edges) | ConnectedComponents(8)
        assert_that(out, equal_to(expected))


def _doc(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(VOCAB) for _ in range(n)]


def _edit(rng: random.Random, words: list[str], target: float, shingler: Shingler) -> list[str]:
    """A copy of `words` with random substitutions until its 5-gram Jaccard with the
    original first drops to `target` or below."""
    original = shingler(" ".join(words))
    copy = list(words)
    while jaccard(original, shingler(" ".join(copy))) > target:
        for _ in range(2):
            copy[rng.randrange(len(copy))] = rng.choice(VOCAB)
    return copy


def _planted(tmp_path: Path, originals: int = 150, seed: int = 11) -> tuple[Path, list, Shingler]:
    """Originals; copies at Jaccard ~0.9; look-alikes at ~0.5. Returns (clean store, pairs)."""
    rng = random.Random(seed)
    shingler = Shingler(5)
    records, pairs = [], []
    for i in range(originals):
        base = _doc(rng, rng.randrange(150, 400))
        copy = _edit(rng, base, 0.9 + rng.uniform(-0.02, 0.03), shingler)
        alike = _edit(rng, base, 0.5 + rng.uniform(-0.05, 0.05), shingler)
        ids = [f"o{i:04d}", f"c{i:04d}", f"l{i:04d}"]
        for doc_id, words in zip(ids, (base, copy, alike), strict=True):
            records.append({"id": doc_id, "text": " ".join(words)})
        sets = {d: shingler(r["text"]) for d, r in zip(ids, records[-3:], strict=True)}
        pairs += [
            (a, b, jaccard(sets[a], sets[b]))
            for a, b in ((ids[0], ids[1]), (ids[0], ids[2]), (ids[1], ids[2]))
        ]
    rng.shuffle(records)
    write_jsonl(tmp_path / "raw" / "planted.jsonl", records)
    run_clean(
        CleanConfig(inputs=[str(tmp_path / "raw")], output=str(tmp_path / "clean"), id_field="id")
    )
    return tmp_path / "clean", pairs, shingler


def _quality(pairs, clusters) -> tuple[float, float]:
    def same(a, b):
        return clusters.get(a, a) == clusters.get(b, b)

    high = [(a, b) for a, b, j in pairs if j >= 0.85]
    low = [(a, b) for a, b, j in pairs if j <= 0.6]
    recall = sum(same(a, b) for a, b in high) / len(high)
    merged = sum(same(a, b) for a, b in low) / len(low)
    return recall, merged


def test_planted_near_duplicates_recall_and_precision(tmp_path) -> None:
    """Recall >= 0.95 on pairs with Jaccard >= 0.85; at most 2% of pairs <= 0.6 merged."""
    clean, pairs, _ = _planted(tmp_path)
    stats = run_dedup(
        DedupConfig(
            inputs=[str(clean)],
            output=str(tmp_path / "docs"),
            near=True,
            emit_clusters=str(tmp_path / "cl"),
        )
    )
    recall, merged = _quality(pairs, clusters_of(tmp_path / "cl"))
    assert recall >= 0.95, recall
    assert merged <= 0.02, merged
    assert accounted(stats) and stats["duplicates.near"] == stats["duplicates"] > 0
    assert stats["largest_clusters"][0]["size"] >= 2
    kept = set(kept_ids(tmp_path / "docs"))
    clusters = clusters_of(tmp_path / "cl")
    assert all(root <= member for member, root in clusters.items())  # the smallest id is kept
    assert all(root in kept for root in clusters.values())


def test_default_banding_leans_to_recall_when_verifying() -> None:
    verified = DedupConfig(inputs=["in"], output="out", near=True, threshold=0.7).near_settings()
    assert (verified.bands, verified.rows, verified.verify) == (36, 7, True)
    merged = DedupConfig(
        inputs=["in"], output="out", near=True, threshold=0.7, verify=False
    ).near_settings()
    assert (merged.bands, merged.rows, merged.verify) == (28, 9, False)
    assert (
        DedupConfig(inputs=["in"], output="out", near=True).near_settings().bands == 25
    )  # 25 x 10 at 0.8
    with pytest.raises(UsageError, match="fn_weight"):
        DedupConfig(inputs=["in"], output="out", near=True, fn_weight=1.0).near_settings()


@pytest.mark.parametrize(
    ("bands", "rows", "message"),
    [
        (0, 0, "bands must be >= 1, got 0"),  # was "bands x rows must be at most num_perm"
        (4, -1, "rows must be >= 1, got -1"),
        (40, 40, "bands x rows must be at most num_perm"),
        (4, None, "bands and rows: give both, or neither"),
    ],
)
def test_banding_that_no_run_can_use_is_explained(bands, rows, message) -> None:
    config = DedupConfig(inputs=["in"], output="out", near=True, bands=bands, rows=rows)
    with pytest.raises(UsageError) as caught:
        config.near_settings()
    assert str(caught.value).startswith(message)


def test_defaults_find_pairs_just_above_the_threshold_and_merge_none_below(tmp_path) -> None:
    """At --threshold 0.7 with default flags: pairs at true Jaccard 0.70-0.80 are found with
    recall >= 0.93 (36 x 7 bands collide with 95.5% of pairs at 0.70 and 99.98% at 0.80, so
    about 98.5% are expected: more than 7 misses in 100 has probability below 1e-3; the
    unverified 28 x 9 expects 87% and fails), and no pair at 0.55-0.65 is merged (each
    candidate's exact Jaccard is checked)."""
    rng = random.Random(5)
    shingler = Shingler(5)
    records, near, far = [], [], []
    for i in range(120):
        base = _doc(rng, rng.randrange(200, 400))
        copy = _edit(rng, base, rng.uniform(0.71, 0.80), shingler)
        alike = _edit(rng, base, rng.uniform(0.55, 0.65), shingler)
        ids = (f"o{i:04d}", f"c{i:04d}", f"l{i:04d}")
        for doc_id, words in zip(ids, (base, copy, alike), strict=True):
            records.append({"id": doc_id, "text": " ".join(words)})
        sets = [shingler(r["text"]) for r in records[-3:]]
        near.append((ids[0], ids[1], jaccard(sets[0], sets[1])))
        far.append((ids[0], ids[2], jaccard(sets[0], sets[2])))
        far.append((ids[1], ids[2], jaccard(sets[1], sets[2])))
    near = [pair for pair in near if 0.7 <= pair[2] < 0.8]  # an edit may overshoot a little
    assert len(near) >= 100 and all(j < 0.7 for *_, j in far)
    rng.shuffle(records)
    write_jsonl(tmp_path / "raw" / "x.jsonl", records)
    run_clean(
        CleanConfig(inputs=[str(tmp_path / "raw")], output=str(tmp_path / "clean"), id_field="id")
    )
    config = DedupConfig(
        inputs=[str(tmp_path / "clean")],
        output=str(tmp_path / "docs"),
        near=True,
        threshold=0.7,
        emit_clusters=str(tmp_path / "cl"),
    )
    stats = run_dedup(config)
    clusters = clusters_of(tmp_path / "cl")
    found = sum(clusters.get(a, a) == clusters.get(b, b) for a, b, _ in near) / len(near)
    assert found >= 0.93, found
    assert not any(clusters.get(a, a) == clusters.get(b, b) for a, b, _ in far)
    assert stats["near.pairs_rejected"] > 0 and accounted(stats)


def test_verified_chains_merge_and_lookalikes_stay_apart(tmp_path) -> None:
    rng = random.Random(2)
    shingler = Shingler(5)
    a = _doc(rng, 300)
    b = _edit(rng, a, 0.86, shingler)
    c = _edit(rng, b, 0.86, shingler)
    assert jaccard(shingler(" ".join(a)), shingler(" ".join(c))) < 0.8
    far = _edit(rng, a, 0.6, shingler)
    records = [
        {"id": k, "text": " ".join(v)} for k, v in (("a", a), ("b", b), ("c", c), ("z", far))
    ]
    write_jsonl(tmp_path / "raw" / "x.jsonl", records)
    run_clean(
        CleanConfig(inputs=[str(tmp_path / "raw")], output=str(tmp_path / "clean"), id_field="id")
    )
    stats = run_dedup(
        DedupConfig(
            inputs=[str(tmp_path / "clean")],
            output=str(tmp_path / "docs"),
            near=True,
            verify=True,
            bands=32,
            rows=8,
        )
    )
    assert kept_ids(tmp_path / "docs") == ["a", "z"]
    assert stats["near.pairs_rejected"] >= 1 and accounted(stats)


@pytest.mark.slow
def test_long_chains_finish_in_extra_rounds(tmp_path) -> None:
    rng = random.Random(4)
    shingler = Shingler(5)
    words = _doc(rng, 400)
    records = []
    for i in range(24):
        records.append({"id": f"d{(i * 7) % 24:02d}", "text": " ".join(words)})
        words = _edit(rng, words, 0.95, shingler)
    write_jsonl(tmp_path / "raw" / "chain.jsonl", records)
    run_clean(
        CleanConfig(inputs=[str(tmp_path / "raw")], output=str(tmp_path / "clean"), id_field="id")
    )
    stats = run_dedup(
        DedupConfig(
            inputs=[str(tmp_path / "clean")],
            output=str(tmp_path / "docs"),
            near=True,
            cc_rounds=1,
            emit_clusters=str(tmp_path / "cl"),
        )
    )
    assert stats["cc_rounds_run"] > 1
    assert kept_ids(tmp_path / "docs") == ["d00"]
    assert set(clusters_of(tmp_path / "cl").values()) == {"d00"} and accounted(stats)
    assert stats["largest_clusters"] == [{"id": "d00", "size": 24}]


def test_line_dedup_keeps_each_shared_line_once(tmp_path) -> None:
    shared = "Subscribe to our newsletter for weekly updates."
    texts = {
        "a": f"Cats sleep a lot. They purr when happy. They hunt mice.\n{shared}",
        "b": f"Dogs bark at night. They love walks. They guard homes.\n{shared}",
        "c": shared,
    }
    write_jsonl(tmp_path / "raw" / "x.jsonl", [{"id": k, "text": v} for k, v in texts.items()])
    run_clean(
        CleanConfig(inputs=[str(tmp_path / "raw")], output=str(tmp_path / "clean"), id_field="id")
    )
    stats = run_dedup(
        DedupConfig(
            inputs=[str(tmp_path / "clean")], output=str(tmp_path / "docs"), line_dedup=True
        )
    )
    rows = [r for f in (tmp_path / "docs").glob("part-*") for r in pq.read_table(f).to_pylist()]
    assert sum(shared in r["text"] for r in rows) == 1
    assert stats["line_dedup.lines_removed"] == 2 and accounted(stats)
    assert sum(v for k, v in stats.items() if k.startswith("dropped.line_dedup")) <= 1


def test_run_dedup_counts_exact_duplicates(tmp_path) -> None:
    write_jsonl(
        tmp_path / "raw" / "x.jsonl", [{"text": t} for t in ["one", "two", "one", "ONE", "three"]]
    )
    run_clean(CleanConfig(inputs=[str(tmp_path / "raw")], output=str(tmp_path / "clean")))
    stats = run_dedup(DedupConfig(inputs=[str(tmp_path / "clean")], output=str(tmp_path / "docs")))
    assert (stats["documents_in"], stats["documents_out"], stats["duplicates"]) == (5, 3, 2)
    assert stats["duplicates.exact"] == 2 and stats["clusters"] == 1
    assert stats["upstream"]["stage"] == "clean" and accounted(stats)
    with pytest.raises(UsageError, match="bands"):
        run_dedup(
            DedupConfig(
                inputs=[str(tmp_path / "clean")],
                output=str(tmp_path / "o"),
                near=True,
                bands=30,
                rows=10,
            )
        )
    with pytest.raises(UsageError, match=r"^output \(.*\) is input \(.*\): a run would read"):
        run_dedup(DedupConfig(inputs=[str(tmp_path / "clean")], output=str(tmp_path / "clean")))
    with pytest.raises(BadInputError, match=r"stats\.json"):
        run_dedup(DedupConfig(inputs=[str(tmp_path / "raw")], output=str(tmp_path / "o")))


@pytest.mark.slow
def test_one_or_two_worker_processes_write_the_same_bytes(tmp_path) -> None:
    clean, _, _ = _planted(tmp_path, originals=40, seed=3)
    files = {}
    for name, argv in (
        ("one", []),
        ("two", ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]),
    ):
        out = tmp_path / name
        stats = run_dedup(
            DedupConfig(inputs=[str(clean)], output=str(out), near=True, line_dedup=True), argv
        )
        assert stats["duplicates"] > 0 and stats["documents_in"] == 120
        files[name] = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    # Every file, stats.json included (shuffle files are counted outside it).
    assert files["one"].keys() == files["two"].keys()
    assert files["one"] == files["two"]
