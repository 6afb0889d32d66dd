import bz2
import gzip
import io
import json
import lzma
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from clozeworks.corpus.text.placing import format_by_name
from clozeworks.corpus.text.readers import (
    RawDocument,
    ReadOptions,
    ReadTask,
    Rejected,
    count_newlines,
    decompressing,
    iter_lines,
    plan_parquet_reads,
    plan_reads,
    read_jsonl,
    read_parquet,
    read_task,
    read_txt_blocks,
    read_txt_file,
    with_bases,
)
from clozeworks.schemas.errors import BadInputError


def reasons(records):
    return [r.reason if isinstance(r, Rejected) else "ok" for r in records]


def keyed(records):
    return [(r.reason, r.position) if isinstance(r, Rejected) else (r.id, r.text) for r in records]


def read_split(data: bytes, fmt: str, chunk: int, options: ReadOptions) -> list:
    """Read `data` the way the pipeline does: planned ranges, numbered by newline counts."""
    tasks = plan_reads("f", fmt, len(data), options.doc_sep, chunk)
    if tasks[0].base is None:
        counts = [count_newlines(io.BytesIO(data), t.start, t.end) for t in tasks]
        tasks = with_bases(tasks, counts)
    out = []
    for task in tasks:
        out.extend(read_task(task, io.BytesIO(data), options))
    return out


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
        json.dumps({"text": "x" * 300}).encode(),
    ]
    stream = io.BytesIO(b"\n".join(lines) + b"\n")
    records = list(read_jsonl(stream, "in.jsonl", ReadOptions(id_field="id", max_record_bytes=200)))
    assert reasons(records) == [
        "ok",
        "bad_json",
        "bad_utf8",
        "missing_text",
        "non_string_text",
        "empty_text",
        "bad_json",
        "ok",
        "too_long",
    ]
    assert records[0].id == "in.jsonl#1" and records[7].id == "doc-7"
    assert records[1].position == 2 and records[1].sample == "{not json"
    assert records[-1].position == 10


def test_valid_json_that_is_not_text_is_counted_not_raised() -> None:
    # Each of these once killed a whole clean job: a lone surrogate is valid JSON but cannot
    # be written as UTF-8, and deep nesting exhausts the parser's recursion.
    lines = [
        b'{"text": "lone \\ud800 surrogate"}',
        b'{"text": "fine", "id": "bad \\udfff id"}',
        b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"text": "still read", "id": "ok"}',
    ]
    stream = io.BytesIO(b"\n".join(lines) + b"\n")
    options = ReadOptions(id_field="id", max_record_bytes=1 << 20)
    records = list(read_jsonl(stream, "in.jsonl", options))
    assert reasons(records) == ["bad_utf8", "bad_utf8", "bad_json", "ok"]
    assert records[2].detail == "nested too deeply" and records[3].id == "ok"


def test_ids_are_stable_across_reads() -> None:
    data = b'{"text": "a"}\n{"text": "b"}\n'
    first = [r.id for r in read_jsonl(io.BytesIO(data), "x.jsonl")]
    assert first == [r.id for r in read_jsonl(io.BytesIO(data), "x.jsonl")]
    assert first == ["x.jsonl#1", "x.jsonl#2"]


def test_iter_lines_skips_an_overlong_line_without_holding_it() -> None:
    data = b"short\n" + b"y" * (3 << 20) + b"\nafter\nlast-no-newline"
    lines = list(iter_lines(io.BytesIO(data), 0, max_bytes=1 << 20))
    assert [line for _, line in lines] == [b"short", None, b"after", b"last-no-newline"]
    assert [offset for offset, _ in lines] == [0, 6, 6 + (3 << 20) + 1, 6 + (3 << 20) + 7]


def test_txt_blocks_and_whole_files() -> None:
    data = b"first block\nline two\n\n \nsecond block\n"
    blocks = list(read_txt_blocks(io.BytesIO(data), "a.txt"))
    assert [b.text for b in blocks] == ["first block\nline two", "second block"]
    assert blocks[1].id == "a.txt#5"
    (whole,) = read_txt_file(io.BytesIO(data), "a.txt")
    assert isinstance(whole, RawDocument) and whole.id == "a.txt#1"
    (big,) = read_txt_file(io.BytesIO(data), "a.txt", ReadOptions(max_record_bytes=10))
    assert big.reason == "too_long"


_LINE = st.one_of(
    st.just(b""),
    st.just(b"   "),
    st.just(b"{broken"),
    st.just(b"\xff\xfe"),
    st.text(alphabet="ab \u00e9", max_size=30).map(lambda t: json.dumps({"text": t}).encode()),
    st.integers(40, 90).map(lambda n: json.dumps({"text": "z" * n}).encode()),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_LINE, max_size=25), st.integers(1, 60), st.booleans())
def test_split_jsonl_reads_exactly_what_a_whole_read_does(lines, chunk, final_newline) -> None:
    data = b"\n".join(lines) + (b"\n" if final_newline else b"")
    options = ReadOptions(max_record_bytes=64)
    whole = list(read_jsonl(io.BytesIO(data), "f", options))
    assert keyed(read_split(data, "jsonl", chunk, options)) == keyed(whole)


_TXT_LINE = st.sampled_from([b"", b" ", b"\t", b"alpha beta", b"gamma.", b"x" * 40, b"\xff"])


@settings(max_examples=150, deadline=None)
@given(st.lists(_TXT_LINE, max_size=25), st.integers(1, 50))
def test_split_blank_blocks_read_exactly_what_a_whole_read_does(lines, chunk) -> None:
    data = b"\n".join(lines) + b"\n"
    options = ReadOptions(doc_sep="blank", max_record_bytes=60)
    whole = list(read_txt_blocks(io.BytesIO(data), "f", options))
    assert keyed(read_split(data, "txt", chunk, options)) == keyed(whole)


def test_planning_splits_only_what_can_be_split() -> None:
    assert plan_reads("a.jsonl", "jsonl", 100, chunk_bytes=1000) == [ReadTask("a.jsonl", "jsonl")]
    assert len(plan_reads("a.jsonl.gz", "jsonl", 10_000, chunk_bytes=1000)) == 1
    assert len(plan_reads("a.txt", "txt", 10_000, "file", chunk_bytes=1000)) == 1
    ranges = plan_reads("a.txt", "txt", 2500, "blank", chunk_bytes=1000)
    assert [(t.start, t.end, t.base) for t in ranges] == [
        (0, 1000, None),
        (1000, 2000, None),
        (2000, None, None),
    ]
    groups = plan_parquet_reads("p", [10, 10, 10, 5], [600, 600, 600, 100], chunk_bytes=1000)
    assert [(t.start, t.end, t.base) for t in groups] == [(0, 1, 0), (1, 2, 10), (2, None, 20)]


@pytest.mark.parametrize(
    ("name", "compress"),
    [
        ("a.jsonl.gz", gzip.compress),
        ("a.jsonl.zst", zstandard.ZstdCompressor().compress),
        ("a.jsonl.bz2", bz2.compress),
        ("a.jsonl.xz", lzma.compress),
    ],
)
def test_compressed_streams_and_format_detection(name, compress) -> None:
    payload = b'{"text": "zipped"}\n' * 3
    assert format_by_name(name) == "jsonl"
    docs = list(read_jsonl(decompressing(io.BytesIO(compress(payload)), name), name))
    assert [d.text for d in docs] == ["zipped"] * 3
    assert format_by_name("x.parquet.gz") == "parquet" and format_by_name("notes.md") is None


def test_parquet_rows_row_groups_and_bad_columns() -> None:
    buf = io.BytesIO()
    table = pa.table({"content": ["one", None, "three", "x" * 50, "", "six"], "k": list("abcdef")})
    pq.write_table(table, buf, row_group_size=2)
    records = list(
        read_parquet(
            io.BytesIO(buf.getvalue()), "t.parquet", ReadOptions("content", max_record_bytes=20)
        )
    )
    assert reasons(records) == ["ok", "missing_text", "ok", "too_long", "empty_text", "ok"]
    assert records[-1].id == "t.parquet#6"
    tail = list(
        read_parquet(
            io.BytesIO(buf.getvalue()), "t.parquet", ReadOptions("content", "k"), 2, None, 4
        )
    )
    assert [r.id for r in tail if isinstance(r, RawDocument)] == ["f"]
    assert [r.position for r in tail if isinstance(r, Rejected)] == [5]
    with pytest.raises(BadInputError, match=r"t\.parquet: no column 'text'"):
        list(read_parquet(io.BytesIO(buf.getvalue()), "t.parquet"))


@pytest.mark.parametrize(
    ("column", "message"),
    [
        (pa.array([{"a": 1}, {"a": 2}]), "column 'id' holds struct<a: int64>, not single"),
        (pa.array([[1], [2]]), "column 'id' holds list<element: int64>, not single"),
    ],
)
def test_a_parquet_column_without_single_values_is_one_line(column, message) -> None:
    # Found by the fuzzer (tests/fuzz): an `id` that is an empty group was a KeyError.
    # (pyarrow cannot write an empty group; a group with a field takes the same path.)
    buf = io.BytesIO()
    pq.write_table(pa.table({"text": ["a", "b"], "id": column}), buf)
    with pytest.raises(BadInputError, match=rf"t\.parquet: {re.escape(message)}"):
        list(read_parquet(io.BytesIO(buf.getvalue()), "t.parquet", ReadOptions(id_field="id")))
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_arrays([pa.array(["a"]), pa.array(["b"])], ["text", "text"]), buf)
    with pytest.raises(BadInputError, match="2 columns are named 'text'"):
        list(read_parquet(io.BytesIO(buf.getvalue()), "t.parquet"))


def test_an_id_that_is_not_a_string_or_an_integer_is_rejected_as_bad_id() -> None:
    # such an id used to become a Python repr ("{'a': 1}", "True", "b'x'")
    ids = ['"seven"', "7", '{"a": 1}', "[1]", "true", "1.5", "null"]
    lines = "".join(f'{{"id": {i}, "text": "document {n}"}}\n' for n, i in enumerate(ids))
    out = list(read_jsonl(io.BytesIO(lines.encode()), "in.jsonl", ReadOptions(id_field="id")))
    kept = [r.id for r in out if not isinstance(r, Rejected)]
    assert kept == ["seven", "7", "in.jsonl#7"]  # a null id: the position, as with no field
    bad = [(r.reason, r.detail) for r in out if isinstance(r, Rejected)]
    assert bad == [("bad_id", "dict"), ("bad_id", "list"), ("bad_id", "bool"), ("bad_id", "float")]
