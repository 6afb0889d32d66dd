import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipelines.clean import CleanConfig, run_clean
from pipelines.dedup import DedupConfig, ExactDedup, run_dedup
from tests.conftest import write_jsonl


def row(doc_id: str, text: str) -> dict[str, str]:
    return {"id": doc_id, "text": text, "source": "s", "meta": "{}"}


def _id(r):
    return r["id"]


def test_exact_dedup_keeps_the_smallest_id() -> None:
    rows = [
        row("b", "Same text"),
        row("a", "same   TEXT"),
        row("c", "other"),
        row("d", "same text"),
    ]
    with TestPipeline() as p:
        kept = p | beam.Create(rows) | ExactDedup() | beam.Map(_id)
        assert_that(kept, equal_to(["a", "c"]))


def test_run_dedup_counts_duplicates(tmp_path) -> None:
    write_jsonl(
        tmp_path / "raw" / "x.jsonl", [{"text": t} for t in ["one", "two", "one", "ONE", "three"]]
    )
    run_clean(CleanConfig(inputs=[str(tmp_path / "raw")], output=str(tmp_path / "clean")))
    stats = run_dedup(DedupConfig(input=str(tmp_path / "clean"), output=str(tmp_path / "docs")))
    assert (stats["documents_in"], stats["documents_out"], stats["duplicates"]) == (5, 3, 2)
    assert stats["upstream"]["stage"] == "clean"
