import json

import apache_beam as beam
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from clozeworks.cli import main
from clozeworks.pipelines.plumbing.runner import LocalRunner
from clozeworks.pipelines.plumbing.shuffle import Shuffle
from clozeworks.pipelines.unique_ids import UniqueIds


def row(doc_id: str, text: str, source: str = "a.jsonl") -> dict[str, str]:
    return {"id": doc_id, "text": text, "source": source, "meta": "{}"}


def _id_text(r: dict[str, str]) -> tuple[str, str]:
    return r["id"], r["text"]


def _reason_id(item) -> tuple[str, str]:
    return item[0], item[1].id


@pytest.mark.parametrize("through_files", [True, False])
def test_one_row_per_id_whichever_order_they_come_in(tmp_path, through_files) -> None:
    rows = [row("a", "zebra"), row("b", "only b"), row("a", "apple"), row("a", "mango", "z")]
    shuffle = Shuffle(str(tmp_path / "shuffle"), 4) if through_files else Shuffle()
    for order in (rows, rows[::-1]):
        with TestPipeline(runner=LocalRunner()) as p:
            out = p | beam.Create(order) | UniqueIds(shuffle)
            assert_that(
                out.kept | "Kept" >> beam.Map(_id_text), equal_to([("a", "apple"), ("b", "only b")])
            )
            assert_that(
                out.dropped | "Dropped" >> beam.Map(_reason_id),
                equal_to([("duplicate_id", "a"), ("duplicate_id", "a")]),
                label="CheckDropped",
            )


def test_clean_with_an_id_field_keeps_one_document_per_id(tmp_path) -> None:
    raw = tmp_path / "raw.jsonl"
    docs = [("a", "the first document"), ("b", "a document b"), ("a", "a second document a")]
    raw.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs))
    out, rejects = tmp_path / "docs", tmp_path / "rejects"
    args = ["clean", "--input", str(raw), "--output", str(out), "--id-field", "id"]
    assert main([*args, "--rejects", str(rejects)]) == 0
    table = pq.read_table(sorted(out.glob("part-*.parquet"))).to_pylist()
    assert sorted(r["id"] for r in table) == ["a", "b"]
    stats = json.loads((out / ".stats.json").read_text())
    assert stats["dropped.duplicate_id"] == 1 and stats["documents_out"] == 2
    assert stats["bytes_out"] == sum(len(r["text"].encode()) for r in table)
    assert not list(out.glob(".staging-*")) and not (out / "_shuffle").exists()
