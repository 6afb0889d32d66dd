"""`cloze dedup`: document stores -> one store without duplicate documents.

Exact copies and MinHash near-duplicates become edges of one graph; its connected
components are the clusters (so A~B and B~C puts A, B and C together), and of each cluster
the document with the smallest id is kept. Optionally, C4-style line dedup then removes
lines that several kept documents share from all but one of them.

The pipeline: read documents -> edges (ExactEdges, CandidateEdges [-> VerifyPairs]) ->
ConnectedComponents -> ApplyClusters (a join by id) -> [LineDedup] -> write. If the
unrolled star rounds did not finish the components (`cc.unsettled` > 0, rare: it takes very
long chains), more rounds run on the saved edges and the documents are joined again.
Several input stores are read as one; an id two of them share is kept once (the row whose
(source, text, meta) sorts first, as clean does with `--id-field`), the others dropped as
`duplicate_id`, since every later step keys on ids.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.coders import FastPrimitivesCoder, StrUtf8Coder
from apache_beam.io.filesystems import FileSystems

from clozeworks.corpus.dedup.exact import keep_owned_lines, line_keys, owner_rank, too_few_sentences
from clozeworks.corpus.dedup.minhash import optimal_param
from clozeworks.corpus.outputs import check_apart
from clozeworks.pipelines.components import ConnectedComponents
from clozeworks.pipelines.near_dedup import CandidateEdges, ExactEdges, NearSettings, VerifyPairs
from clozeworks.pipelines.plumbing.beamfs import BEAM_FS
from clozeworks.pipelines.plumbing.counters import counter, utf8_bytes
from clozeworks.pipelines.plumbing.progress import Bar
from clozeworks.pipelines.plumbing.shuffle import Shuffle
from clozeworks.pipelines.plumbing.stage import StageRun, remove_shuffle
from clozeworks.pipelines.read_store import DOCUMENTS_READ, ReadDocuments, read_store_stats
from clozeworks.pipelines.unique_ids import UniqueIds
from clozeworks.pipelines.write_store import WriteParquetParts, parts_for
from clozeworks.schemas.documents import DOCS_GLOB, DOCS_PREFIX
from clozeworks.schemas.errors import ClozeError, SettingError
from clozeworks.schemas.settings import DEFAULT_SEED, SEEDS, check_at_least, check_choices, setting
from clozeworks.schemas.sidecars import STATS_FILE
from clozeworks.schemas.stats import StoreStats

CLUSTERS = pa.schema(
    [pa.field("id", pa.string(), nullable=False), pa.field("cluster", pa.string(), nullable=False)]
)
CLUSTERS_GLOB = "clusters-*.parquet"
CLUSTERS_MARKER = "clusters.json"
EDGES = pa.schema(
    [
        pa.field("child", pa.string(), nullable=False),
        pa.field("parent", pa.string(), nullable=False),
    ]
)
TOP_CLUSTERS = 10
ID = StrUtf8Coder()
# A document row: a dict of strings, which this coder writes without pickling.
ROW = FastPrimitivesCoder()
MAX_ROUNDS = 256  # far past any real graph: a path of 10^6 nodes needs about 20


@dataclass(frozen=True)
class DedupSettings:
    exact: bool = setting(True, "exact dedup")
    near: bool = setting(False, "MinHash near-dedup")
    threshold: float = setting(0.8, "Jaccard threshold")
    ngram: int = setting(5, "words per shingle")
    num_perm: int = setting(256, "MinHash permutations")
    bands: int | None = setting(None, "LSH bands (default: optimal for --threshold)")
    rows: int | None = setting(None, "rows per band (default: optimal)")
    seed: int = setting(DEFAULT_SEED, "MinHash seed", bounds=SEEDS)
    # Weight of missed pairs when choosing bands x rows (false candidates get 1 - it); None
    # picks by --verify. text-dedup's optimal_param weighs both equally. Without verification
    # every candidate is merged, so 0.8 keeps false candidates rare (21 bands x 12 rows at
    # 0.8: 96% of pairs at 0.85 collide, 0.5% at 0.5). With verification a false candidate
    # costs one exact comparison and is then dropped, so 0.95 leans much further to recall:
    # 36 x 7 at 0.7 (95% of pairs at 0.7 and 99.4% at 0.75 collide), 25 x 10 at 0.8.
    fn_weight: float | None = setting(
        None,
        "weight of missed pairs when choosing bands x rows; false candidates get "
        "1 - this (0.95 when verifying, 0.8 with --no-verify)",
    )
    # Exact Jaccard of each candidate pair, as MinHash estimates alone mistake pairs around
    # the threshold either way (sd 0.03 at 0.7 with 256 permutations).
    verify: bool = setting(
        True,
        "keep only candidate pairs whose true Jaccard similarity reaches --threshold "
        "(--no-verify merges every MinHash candidate)",
    )
    line_dedup: bool = setting(False, "C4: keep each repeated line in one document")
    line_dedup_min_sentences: int = setting(
        3, "drop documents left with fewer sentences by --line-dedup (3, as C4)"
    )
    cc_rounds: int = setting(6, "star rounds per pipeline; more run automatically if needed")

    # The settings that only near-dedup reads.
    NEAR_ONLY = ("threshold", "ngram", "num_perm", "bands", "rows", "seed", "fn_weight", "verify")

    def near_settings(self) -> NearSettings:
        """Bands and rows from the settings, else `optimal_param` for the threshold and
        weights; SettingError for values no run can use."""
        check_choices(self)
        if not 0.0 < self.threshold < 1.0:
            raise SettingError("threshold", f"must be in (0, 1), got {self.threshold}")
        for name in ("ngram", "num_perm", "cc_rounds"):
            check_at_least(name, getattr(self, name), 1)
        for name in ("bands", "rows"):
            if getattr(self, name) is not None:
                check_at_least(name, getattr(self, name), 1)
        if (self.bands is None) != (self.rows is None):
            raise SettingError("bands", "and {rows}: give both, or neither")
        fn_weight = self.fn_weight
        if fn_weight is None:
            fn_weight = 0.95 if self.verify else 0.8
        if not 0.0 < fn_weight < 1.0:
            raise SettingError("fn_weight", f"must be in (0, 1), got {fn_weight}")
        bands, rows = (
            (self.bands, self.rows)
            if self.bands is not None and self.rows is not None
            else optimal_param(self.threshold, self.num_perm, 1.0 - fn_weight, fn_weight)
        )
        if bands * rows > self.num_perm:
            raise SettingError(
                "bands", f"x {{rows}} must be at most {{num_perm}} ({self.num_perm})"
            )
        return NearSettings(
            self.threshold, self.ngram, self.num_perm, bands, rows, self.seed, self.verify
        )


@dataclass(frozen=True, kw_only=True)
class DedupConfig(DedupSettings):
    """The dedup settings, and where: the input stores, the output store, and where the
    clusters go (if anywhere)."""

    inputs: Sequence[str]
    output: str
    emit_clusters: str | None = None


# --- applying the clusters to the documents -------------------------------------------------


# Counted once per document, so looked up once per process.
_DOCUMENTS_IN, _BYTES_IN = counter("documents_in"), counter("bytes_in")
_DOCUMENTS_OUT, _BYTES_OUT = counter("documents_out"), counter("bytes_out")


def _count_in(row: dict[str, Any]) -> dict[str, Any]:
    _DOCUMENTS_IN.inc()
    _BYTES_IN.inc(utf8_bytes(row["text"]))
    return row


def _by_id(row: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return row["id"], row


def _edge_row(edge: tuple[str, str]) -> dict[str, str]:
    return {"child": edge[0], "parent": edge[1]}


def _row_edge(row: dict[str, str]) -> tuple[str, str]:
    return row["child"], row["parent"]


def _row_text(row: dict[str, Any]) -> str:
    return str(row["text"])


def _keep_or_drop(item: tuple[str, dict[str, Iterable[Any]]]) -> Iterator[dict[str, Any]]:
    doc_id, joined = item
    rows = sorted(joined["doc"], key=_row_text)
    if not rows:
        return
    if len(rows) > 1:  # the same id twice in the input: keep one copy, say so
        counter("dropped.duplicate_id").inc(len(rows) - 1)
    roots = set(joined["root"])
    if roots and min(roots) != doc_id:
        counter("duplicates").inc()
        return
    yield rows[0]


class ApplyClusters(beam.PTransform):
    """(document rows, (child, root) pairs) -> the rows that are not a cluster's child."""

    def __init__(self, shuffle: Shuffle | None = None) -> None:
        super().__init__()
        self.shuffle = shuffle or Shuffle()

    def expand(self, inputs: Any) -> Any:
        rows, assignment = inputs
        coders = {"doc": ROW, "root": ID}
        return (
            {"doc": rows | "KeyById" >> beam.Map(_by_id), "root": assignment}
            | "JoinById" >> self.shuffle.co_group_by_key("apply", ID, coders)
            | "KeepSmallestOfCluster" >> beam.FlatMap(_keep_or_drop)
        )


def _one_per_child(edge: tuple[str, str]) -> tuple[str, int]:
    return edge[1], 1


def _cluster_size(item: tuple[str, int]) -> tuple[int, str]:
    counter("clusters").inc()
    return item[1] + 1, item[0]


def _as_json(top: list[tuple[int, str]]) -> str:
    return json.dumps([{"id": doc_id, "size": size} for size, doc_id in top])


def _member_rows(edge: tuple[str, str]) -> Iterator[dict[str, str]]:
    yield {"id": edge[0], "cluster": edge[1]}


def _root_row(item: tuple[str, int]) -> dict[str, str]:
    return {"id": item[0], "cluster": item[0]}


class ClusterReport(beam.PTransform):
    """(child, root) pairs -> the largest clusters as one JSON line under `staging/_top`, and
    with `clusters_dir`, (id, cluster) rows for every member (the root is its own cluster)."""

    def __init__(
        self, staging: str, clusters_dir: str | None, shuffle: Shuffle, parts: int
    ) -> None:
        super().__init__()
        self.staging = staging
        self.clusters_dir = clusters_dir
        self.shuffle = shuffle
        self.parts = parts

    def expand(self, assignment: Any) -> Any:
        # (root, number of other members); combined before the shuffle, so no worker sees
        # more than one root's partial counts.
        sizes = (
            assignment
            | "MembersPerRoot" >> beam.Map(_one_per_child)
            | "CountMembers" >> beam.CombinePerKey(sum)
        )
        _ = (
            sizes
            | "SizeFirst" >> beam.Map(_cluster_size)
            | "Largest" >> beam.combiners.Top.Of(TOP_CLUSTERS)
            | "TopAsJson" >> beam.Map(_as_json)
            | "WriteTop"
            >> beam.io.WriteToText(BEAM_FS.join(self.staging, "_top", "top"), num_shards=1)
        )
        if self.clusters_dir:
            members = assignment | "MemberRows" >> beam.FlatMap(_member_rows)
            roots = sizes | "RootRows" >> beam.Map(_root_row)
            write = WriteParquetParts(
                self.clusters_dir, self.parts, self.shuffle, CLUSTERS, "clusters"
            )
            # A tuple, not a Flatten: each is spilled where it is made (shuffle.py says why).
            _ = (members, roots) | "WriteClusters" >> write
        return sizes


# --- C4-style line dedup ----------------------------------------------------------------------


def _lines_of(row: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for key in line_keys(row["text"]):
        yield key, owner_rank(row["id"])


def _smallest(item: tuple[str, Iterable[str]]) -> tuple[str, str]:
    return item[0], min(item[1])


def _owner(item: tuple[str, str]) -> tuple[str, str]:
    key, rank = item
    return rank[32:], key  # owner_rank is 32 hex digits + the id


class _RemoveLines(beam.DoFn):
    def __init__(self, min_sentences: int) -> None:
        self.min_sentences = min_sentences

    def process(self, item: tuple[str, dict[str, Iterable[Any]]]) -> Iterator[dict[str, Any]]:
        _, joined = item
        for row in joined["doc"]:
            text, removed = keep_owned_lines(row["text"], set(joined["owned"]))
            counter("line_dedup.lines_removed").inc(removed)
            if not text:
                counter("dropped.line_dedup.empty").inc()
            elif removed and too_few_sentences(text, self.min_sentences):
                counter("dropped.line_dedup.too_few_sentences").inc()
            else:
                yield {**row, "text": text}


class LineDedup(beam.PTransform):
    """Document rows -> the rows with every line that several documents share kept in one of
    them only (TFDS C4 `remove_duplicate_text`); documents left empty, or with fewer than
    `min_sentences` sentences after losing lines, are dropped."""

    def __init__(self, min_sentences: int, shuffle: Shuffle | None = None) -> None:
        super().__init__()
        self.min_sentences = min_sentences
        self.shuffle = shuffle or Shuffle()

    def expand(self, rows: Any) -> Any:
        owned = (
            rows
            | "LinesOfDocument" >> beam.FlatMap(_lines_of)
            # Per line, the smallest rank wins.
            | "RanksOfLine" >> self.shuffle.group_by_key("lines", ID, ID)
            | "OwnerOfLine" >> beam.Map(_smallest)
            | "ByOwner" >> beam.Map(_owner)
        )
        coders = {"doc": ROW, "owned": ID}
        return (
            {"doc": rows | "KeyById" >> beam.Map(_by_id), "owned": owned}
            | "JoinById" >> self.shuffle.co_group_by_key("lines-join", ID, coders)
            | "RemoveLines" >> beam.ParDo(_RemoveLines(self.min_sentences))
        )


# --- the pipelines -------------------------------------------------------------------------


def _count_out(row: dict[str, Any]) -> dict[str, Any]:
    _DOCUMENTS_OUT.inc()
    _BYTES_OUT.inc(utf8_bytes(row["text"]))
    return row


class _WriteEdges(beam.PTransform):
    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def expand(self, edges: Any) -> Any:
        return (
            edges
            | "EdgeRows" >> beam.Map(_edge_row)
            | "WriteEdges" >> beam.io.WriteToParquet(self.prefix, schema=EDGES)
        )


def _apply_and_write(
    rows: Any,
    assignment: Any,
    config: DedupConfig,
    staging: str,
    clusters: str | None,
    shuffle: Shuffle,
    parts: int,
) -> None:
    _ = assignment | "Report" >> ClusterReport(staging, clusters, shuffle, parts)
    kept = (rows, assignment) | "Apply" >> ApplyClusters(shuffle)
    if config.line_dedup:
        kept = kept | "LineDedup" >> LineDedup(config.line_dedup_min_sentences, shuffle)
    # Written in parts by id: which documents survive a join does not depend on the
    # workers, but which of them share a file would.
    write = WriteParquetParts(staging, parts, shuffle)
    _ = kept | "CountOut" >> beam.Map(_count_out) | "Write" >> write


def _edges(rows: Any, config: DedupConfig, settings: NearSettings, shuffle: Shuffle) -> Any:
    parts = []
    if config.exact:
        parts.append(rows | "ExactEdges" >> ExactEdges(shuffle))
    if config.near:
        candidates, shingles = rows | "NearEdges" >> CandidateEdges(settings, shuffle)
        if settings.verify:
            verify = VerifyPairs(settings.threshold, shuffle)
            candidates = (candidates, shingles) | "Verify" >> verify
        parts.append(candidates)
    return tuple(parts) | "AllEdges" >> beam.Flatten()


class ReadStores(beam.PTransform):
    """The rows of every input store, counted in; one row per id when there are several."""

    def __init__(self, inputs: Sequence[str], shuffle: Shuffle) -> None:
        super().__init__()
        self.inputs, self.shuffle = list(inputs), shuffle

    def expand(self, pbegin: Any) -> Any:
        reads = [
            pbegin | f"Read{i}" >> ReadDocuments(directory)
            for i, directory in enumerate(self.inputs)
        ]
        rows = reads | "AllStores" >> beam.Flatten() | "CountIn" >> beam.Map(_count_in)
        if len(reads) == 1:
            return rows  # a store holds one document per id
        return (rows | "UniqueIds" >> UniqueIds(self.shuffle, counted_out=False)).kept


class Deduplicate(beam.PTransform):
    """The main dedup pipeline: edges, `rounds` star rounds (saved under `state`), apply,
    and the kept documents written as `parts` part files in `staging`."""

    def __init__(
        self,
        config: DedupConfig,
        settings: NearSettings,
        staging: str,
        clusters: str | None,
        state: str,
        rounds: int,
        shuffle: Shuffle | None = None,
        parts: int = 1,
    ) -> None:
        super().__init__()
        self.config, self.settings = config, settings
        self.staging, self.clusters, self.state = staging, clusters, state
        self.rounds, self.shuffle, self.parts = rounds, shuffle or Shuffle(), parts

    def expand(self, pbegin: Any) -> None:
        config, shuffle = self.config, self.shuffle
        rows = pbegin | "Read" >> ReadStores(config.inputs, shuffle)
        if self.rounds:
            edges = _edges(rows, config, self.settings, shuffle) | "Components" >> (
                ConnectedComponents(self.rounds, shuffle)
            )
            _ = edges | "SaveEdges" >> _WriteEdges(f"{self.state}-{self.rounds:04d}")
        else:
            edges = pbegin | "NoEdges" >> beam.Create([])
        _apply_and_write(rows, edges, config, self.staging, self.clusters, shuffle, self.parts)


class MoreRounds(beam.PTransform):
    """Continue the star rounds from saved edges (`previous`), saving as `save_as`."""

    def __init__(
        self, previous: str, save_as: str, rounds: int, shuffle: Shuffle | None = None
    ) -> None:
        super().__init__()
        self.previous, self.save_as, self.rounds = previous, save_as, rounds
        self.shuffle = shuffle or Shuffle()

    def expand(self, pbegin: Any) -> None:
        _ = (
            pbegin
            | "ReadEdges" >> beam.io.ReadFromParquet(self.previous)
            | "AsEdges" >> beam.Map(_row_edge)
            | "Components" >> ConnectedComponents(self.rounds, self.shuffle)
            | "SaveEdges" >> _WriteEdges(self.save_as)
        )


class ApplySavedClusters(beam.PTransform):
    """Join the documents with settled saved edges (`edges_glob`) and write the result."""

    def __init__(
        self,
        config: DedupConfig,
        edges_glob: str,
        staging: str,
        clusters: str | None,
        shuffle: Shuffle | None = None,
        parts: int = 1,
    ) -> None:
        super().__init__()
        self.config, self.edges_glob = config, edges_glob
        self.staging, self.clusters = staging, clusters
        self.shuffle, self.parts = shuffle or Shuffle(), parts

    def expand(self, pbegin: Any) -> None:
        rows = pbegin | "Read" >> ReadStores(self.config.inputs, self.shuffle)
        edges = (
            pbegin
            | "ReadEdges" >> beam.io.ReadFromParquet(self.edges_glob)
            | "AsEdges" >> beam.Map(_row_edge)
        )
        _apply_and_write(
            rows, edges, self.config, self.staging, self.clusters, self.shuffle, self.parts
        )


_APPLY_COUNTERS = (
    "documents_in",
    "documents_out",
    "bytes_in",
    "bytes_out",
    "duplicates",
    "clusters",
)


def _is_apply_counter(name: str) -> bool:
    return name in _APPLY_COUNTERS or name.startswith(("dropped.", "line_dedup."))


def run_dedup(
    config: DedupConfig, beam_argv: Sequence[str] = (), progress: bool = False
) -> dict[str, Any]:
    """Run deduplication; returns the stats written to `output/.stats.json`. With
    `progress`, bars on stderr while it runs on this machine.

    UsageError for impossible settings, BadInputError when the input is not a finished
    document store; a failed run leaves `output` as it was.
    """
    outputs = {"output": config.output, "emit_clusters": config.emit_clusters}
    check_apart(outputs, {"input": list(config.inputs)})
    if not config.inputs:
        raise SettingError("inputs", "name at least one document store")
    if len(set(config.inputs)) < len(config.inputs):
        raise SettingError("inputs", "names a store twice")
    settings = config.near_settings()
    with StageRun(beam_argv, progress, "dedup") as run:
        run.require_reach(config.inputs, outputs)
        upstreams = [read_store_stats(directory) for directory in config.inputs]
        staging = run.stage(config.output)
        clusters = run.stage(config.emit_clusters) if config.emit_clusters else None
        state = BEAM_FS.join(staging, "_cc", "round")
        text_bytes = sum(u.bytes_out for u in upstreams)
        bars = [
            Bar(DOCUMENTS_READ, "read", sum(u.documents_out for u in upstreams) or None),
            Bar(f"written.{DOCS_PREFIX}", "kept"),
        ]
        with run.progress(bars):
            counters, rounds = _find_and_apply(
                run, config, settings, staging, clusters, state, text_bytes
            )
        top = BEAM_FS.read_json(_only(BEAM_FS.join(staging, "_top", "top*")))
        duplicates = counters.get("duplicates", 0)
        stats = {
            "stage": "dedup",
            "inputs": list(config.inputs),
            **{k: v for k, v in asdict(config).items() if k not in ("inputs", "output")},
            "near_settings": asdict(settings) if config.near else None,
            "cc_rounds_run": rounds,
            "documents_in": counters.get("documents_in", 0),
            "documents_out": counters.get("documents_out", 0),
            "bytes_in": counters.get("bytes_in", 0),
            "bytes_out": counters.get("bytes_out", 0),
            "duplicates": duplicates,
            "duplicates.exact": counters.get("duplicates.exact", 0),
            "duplicates.near": duplicates - counters.get("duplicates.exact", 0),
            "clusters": counters.get("clusters", 0),
            "largest_clusters": top,
            **counters,
            # One input's record nests as `upstream`; several as `upstreams`, in order.
            **(
                {"upstream": upstreams[0].to_json()}
                if len(upstreams) == 1
                else {"upstreams": [u.to_json() for u in upstreams]}
            ),
        }
        # The record as a reader will take it: a stage whose counts do not add up fails here.
        stats = StoreStats.from_json(stats, f"{config.output}/{STATS_FILE}").to_json()
        if clusters and config.emit_clusters:
            summary = {"clusters": stats["clusters"], "largest_clusters": top}
            run.commit(clusters, config.emit_clusters, CLUSTERS_GLOB, CLUSTERS_MARKER, summary)
        run.commit(staging, config.output, DOCS_GLOB, STATS_FILE, stats)
    return stats


def _find_and_apply(
    run: StageRun,
    config: DedupConfig,
    settings: NearSettings,
    staging: str,
    clusters: str | None,
    state: str,
    text_bytes: int,
) -> tuple[dict[str, int], int]:
    """The main pipeline, then more star rounds and a second join only if it was not enough.
    `text_bytes` (the input store's) sizes the shuffles' buckets."""

    def shuffle(name: str) -> Shuffle:
        # Each pipeline's shuffle files go once it is done; a failure removes all of staging.
        return run.shuffle(BEAM_FS.join(staging, "_shuffle", name), text_bytes)

    rounds = config.cc_rounds if (config.exact or config.near) else 0
    parts = parts_for(text_bytes)
    main = shuffle("main")
    with run.pipeline() as p:
        _ = p | "Dedup" >> Deduplicate(
            config, settings, staging, clusters, state, rounds, main, parts
        )
    remove_shuffle(main)
    counters = run.counters
    if not counters.get("cc.unsettled", 0):
        return counters, rounds
    found = {k: v for k, v in counters.items() if not _is_apply_counter(k)}
    while True:
        if rounds >= MAX_ROUNDS:
            raise ClozeError(f"connected components did not settle in {rounds} rounds")
        previous = f"{state}-{rounds:04d}*"
        rounds += config.cc_rounds
        more = shuffle(f"rounds-{rounds:04d}")
        with run.pipeline() as p:
            save_as = f"{state}-{rounds:04d}"
            _ = p | "MoreRounds" >> MoreRounds(previous, save_as, config.cc_rounds, more)
        remove_shuffle(more)
        if not run.counters.get("cc.unsettled", 0):
            break
    # The first pipeline's documents and clusters came from unfinished components.
    _delete(BEAM_FS.join(staging, DOCS_GLOB), BEAM_FS.join(staging, "_top", "*"))
    if clusters:
        _delete(BEAM_FS.join(clusters, CLUSTERS_GLOB))
    apply = shuffle("apply")
    with run.pipeline() as p:
        edges = f"{state}-{rounds:04d}*"
        _ = p | "Apply" >> ApplySavedClusters(config, edges, staging, clusters, apply, parts)
    applied = {k: v for k, v in run.counters.items() if _is_apply_counter(k)}
    return {**found, **applied, "cc.unsettled": 0}, rounds


def _delete(*patterns: str) -> None:
    for pattern in patterns:
        BEAM_FS.delete(BEAM_FS.match(pattern))


def _only(pattern: str) -> str:
    matches = FileSystems.match([pattern])[0].metadata_list
    if len(matches) != 1:
        raise ClozeError(f"expected one file matching {pattern}, found {len(matches)}")
    return str(matches[0].path)
