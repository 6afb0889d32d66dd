import gzip
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

from corpus.readers import (
    RawDocument,
    Rejected,
    decompressing,
    detect_format,
    read_jsonl,
    read_parquet,
    read_txt,
)


def reasons(records):
    return [r.reason if isinstance(r, Rejected) else "ok" for r in records]


def test_jsonl_bad_records_are_counted_by_reason() -> None:
    lines = [
        json.dumps({"text": "good one"}).encode(),
        b"{not json",
        b'{"text": "caf\xe9"}',  # latin-1 byte: invalid UTF-8
        json.dumps({"body": "no text field"}).encode(),
        json.dumps({"text": 42}).encode(),
        json.dumps({"text": "   "}).encode(),
        json.dumps(["a list"]).encode(),
        b"",
        json.dumps({"text": "another", "id": "doc-7"}).encode(),
    ]
    stream = io.BytesIO(b"\n".join(lines) + b"\n")
    records = list(read_jsonl(stream, "in.jsonl", id_field="id"))
    assert reasons(records) == [
        "ok",
        "bad_json",
        "bad_utf8",
        "missing_text",
        "non_string_text",
        "empty_text",
        "bad_json",
        "ok",
    ]
    assert records[0].id == "in.jsonl#1" and records[-1].id == "doc-7"
    assert records[1].position == 2


def test_ids_are_stable_across_reads() -> None:
    data = b'{"text": "a"}\n{"text": "b"}\n'
    first = [r.id for r in read_jsonl(io.BytesIO(data), "x.jsonl")]
    assert (
        first
        == [r.id for r in read_jsonl(io.BytesIO(data), "x.jsonl")]
        == ["x.jsonl#1", "x.jsonl#2"]
    )


def test_txt_blocks_and_whole_files() -> None:
    data = b"first block\nline two\n\n\nsecond block\n"
    blocks = list(read_txt(io.BytesIO(data), "a.txt", doc_sep="blank"))
    assert [b.text for b in blocks] == ["first block\nline two", "second block"]
    assert blocks[1].id == "a.txt#5"
    whole = list(read_txt(io.BytesIO(data), "a.txt"))
    assert len(whole) == 1 and isinstance(whole[0], RawDocument)


def test_compressed_streams_and_format_detection() -> None:
    payload = b'{"text": "zipped"}\n'
    for name, blob in (
        ("a.jsonl.gz", gzip.compress(payload)),
        ("a.jsonl.zst", zstandard.ZstdCompressor().compress(payload)),
    ):
        assert detect_format(name) == "jsonl"
        (doc,) = read_jsonl(decompressing(io.BytesIO(blob), name), name)
        assert doc.text == "zipped"
    assert detect_format("x.parquet.gz") == "parquet" and detect_format("notes.md") == "txt"


def test_parquet_rows() -> None:
    buf = io.BytesIO()
    pq.write_table(pa.table({"content": ["one", None, "three"]}), buf)
    buf.seek(0)
    records = list(read_parquet(buf, "t.parquet", text_field="content"))
    assert reasons(records) == ["ok", "missing_text", "ok"]
