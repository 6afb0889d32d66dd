"""What would be sent to Dataflow: every stage pickles, uses named functions, and expands
only to primitives the Dataflow runner executes (no runner is started)."""

from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.internal import pickler
from apache_beam.pipeline import PipelineVisitor

from clozeworks.corpus.text.filters import build_filters
from clozeworks.pipelines.clean import Clean, CleanConfig
from clozeworks.pipelines.dedup import (
    EDGES,
    ApplySavedClusters,
    DedupConfig,
    Deduplicate,
    MoreRounds,
)
from clozeworks.schemas.documents import DOCUMENT
from tests.conftest import write_jsonl

# Primitives Dataflow (runner v2) runs; everything else must be a composite of these.
DATAFLOW_PRIMITIVES = {
    "beam:transform:impulse:v1",
    "beam:transform:pardo:v1",
    "beam:transform:group_by_key:v1",
    "beam:transform:flatten:v1",
    "beam:transform:read:v1",
    "beam:transform:reshuffle:v1",
    "beam:transform:window_into:v1",
}


class _DoFns(PipelineVisitor):
    def __init__(self) -> None:
        self.fns = []

    def visit_transform(self, node) -> None:
        fn = getattr(node.transform, "fn", None)
        if fn is not None:
            self.fns.append((node.full_label, fn))


def check(p: beam.Pipeline) -> set[str]:
    proto = p.to_runner_api()  # pickles every DoFn, as submission does
    leaves = {
        t.spec.urn
        for t in proto.components.transforms.values()
        if not t.subtransforms
        and t.spec.urn
        # beam.Create's own reshuffle step, which each runner (Dataflow too) expands itself
        and not t.unique_name.endswith("/MaybeReshuffle")
    }
    visitor = _DoFns()
    p.visit(visitor)
    for label, fn in visitor.fns:
        restored = pickler.loads(pickler.dumps(fn))
        assert type(restored) is type(fn), label
        wrapped = getattr(fn, "_fn", None)
        ours = getattr(wrapped, "__module__", "") or ""
        if ours.startswith("clozeworks."):  # Beam's own Create uses a lambda
            assert wrapped.__name__ != "<lambda>", f"{label} uses a lambda"
    return leaves


def test_clean_and_dedup_pipelines_are_dataflow_ready(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "raw" / "a.jsonl", [{"text": "x"}])
    config = CleanConfig(inputs=[str(tmp_path / "raw")], output=str(tmp_path / "docs"), rejects="r")
    filters = build_filters(["length", "c4", "gopher", "fineweb", "language"])
    urns = set()
    p = beam.Pipeline()
    _ = p | Clean(config, [str(tmp_path / "raw" / "a.jsonl")], filters, "s", "r")
    urns |= check(p)

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / ".stats.json").write_text("{}")
    row = {"id": "a", "text": "x", "source": "s", "meta": "{}"}
    pq.write_table(pa.Table.from_pylist([row], DOCUMENT), tmp_path / "docs" / "part-0.parquet")
    edge = {"child": "b", "parent": "a"}
    pq.write_table(pa.Table.from_pylist([edge], EDGES), tmp_path / "state-0002-0.parquet")
    state = str(tmp_path / "state")
    dedup = DedupConfig(
        inputs=[str(tmp_path / "docs")],
        output="o",
        near=True,
        verify=True,
        line_dedup=True,
        emit_clusters="c",
    )
    p = beam.Pipeline()
    _ = p | Deduplicate(dedup, dedup.near_settings(), "s", "c", state, 2)
    urns |= check(p)
    p = beam.Pipeline()
    _ = p | MoreRounds(f"{state}-0002*", f"{state}-0004", 2)
    urns |= check(p)
    p = beam.Pipeline()
    _ = p | ApplySavedClusters(dedup, f"{state}-0002*", "s", "c")
    urns |= check(p)
    assert urns <= DATAFLOW_PRIMITIVES, urns - DATAFLOW_PRIMITIVES
    assert "beam:transform:group_by_key:v1" in urns
