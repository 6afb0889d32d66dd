import json

import apache_beam as beam
import pyarrow.parquet as pq
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from corpus.filters import LengthFilter
from corpus.readers import RawDocument
from pipelines.clean import CleanConfig, CleanDocuments, run_clean
from tests.conftest import write_jsonl


def _id_and_text(row):
    return row["id"], row["text"]


def _reason(item):
    return item[0]


def test_clean_documents_normalizes_and_drops_with_reasons() -> None:
    docs = [
        RawDocument("a", "Hello   world\r\nagain", "s"),
        RawDocument("b", "hi", "s"),
        RawDocument("c", "\x00\x01  ", "s"),
    ]
    with TestPipeline() as p:
        out = p | beam.Create(docs) | CleanDocuments("NFC", [LengthFilter(min_chars=5)])
        assert_that(
            out.kept | "Kept" >> beam.Map(_id_and_text),
            equal_to([("a", "Hello world\nagain")]),
            label="CheckKept",
        )
        assert_that(
            out.dropped | "Reasons" >> beam.Map(_reason),
            equal_to(["length.too_short", "empty_after_normalize"]),
            label="CheckDropped",
        )


def test_run_clean_accounts_for_every_record(tmp_path) -> None:
    raw = tmp_path / "raw"
    write_jsonl(
        raw / "a.jsonl", [{"text": "first document here"}, {"text": ""}, {"nope": 1}, {"text": "x"}]
    )
    (raw / "b.jsonl").write_bytes(b'{"text": "second document"}\n{broken\n\xff\xfe\n')
    stats = run_clean(
        CleanConfig(
            inputs=[str(raw)],
            output=str(tmp_path / "docs"),
            filter_options={"length": {"min_chars": 3}},
        )
    )
    dropped = {k: v for k, v in stats.items() if k.startswith("dropped.")}
    assert dropped == {
        "dropped.empty_text": 1,
        "dropped.missing_text": 1,
        "dropped.length.too_short": 1,
        "dropped.bad_json": 1,
        "dropped.bad_utf8": 1,
    }
    assert stats["documents_in"] == 7 == stats["documents_out"] + sum(dropped.values())
    files = sorted((tmp_path / "docs").glob("part-*.parquet"))
    assert files and files[0].name.endswith("-of-00001.parquet")
    rows = pq.read_table(files[0]).to_pylist()
    assert sorted(r["text"] for r in rows) == ["first document here", "second document"]
    assert json.loads((tmp_path / "docs" / "stats.json").read_text())["documents_out"] == 2
    assert not list((tmp_path / "docs").glob(".staging-*"))
