import bz2
import gzip
import json
import lzma
import os
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from clozeworks.cli import main
from clozeworks.corpus.text.filters import LengthFilter
from clozeworks.corpus.text.readers import RawDocument
from clozeworks.pipelines.clean import CleanConfig, CleanDocuments, run_clean
from clozeworks.pipelines.plumbing.runner import LocalRunner
from clozeworks.schemas.errors import BadInputError, UsageError
from tests.conftest import write_jsonl


def _id_and_text(row):
    return row["id"], row["text"]


def _reason(item):
    return item[0]


def dropped(stats: dict) -> dict:
    return {k: v for k, v in stats.items() if k.startswith("dropped.")}


def kept_rows(directory: Path) -> list[dict]:
    rows = []
    for f in sorted(directory.glob("part-*.parquet")):
        rows.extend(pq.read_table(f).to_pylist())
    return sorted(rows, key=lambda r: r["id"])


def test_clean_documents_normalizes_and_drops_with_reasons() -> None:
    docs = [
        RawDocument("a", "Hello   world\r\nagain", "s"),
        RawDocument("b", "hi", "s"),
        RawDocument("c", "\x00\x01  ", "s"),
    ]
    with TestPipeline(runner=LocalRunner()) as p:
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


def test_run_clean_accounts_for_every_record_and_keeps_rejects(tmp_path) -> None:
    raw = tmp_path / "raw"
    write_jsonl(
        raw / "a.jsonl",
        [{"text": "first document here"}, {"text": ""}, {"nope": 1}, {"text": "x"}, {"text": 7}],
    )
    (raw / "b.jsonl").write_bytes(
        b'{"text": "second document"}\n{broken\n\xff\xfe\n{"text": "' + b"z" * 500 + b'"}\n'
    )
    stats = run_clean(
        CleanConfig(
            inputs=[str(raw)],
            output=str(tmp_path / "docs"),
            filter_options={"length": {"min_chars": 3}},
            rejects=str(tmp_path / "rejects"),
            max_record_bytes=300,
        )
    )
    assert dropped(stats) == {
        "dropped.empty_text": 1,
        "dropped.missing_text": 1,
        "dropped.non_string_text": 1,
        "dropped.length.too_short": 1,
        "dropped.bad_json": 1,
        "dropped.bad_utf8": 1,
        "dropped.too_long": 1,
    }
    assert stats["documents_in"] == 9 == stats["documents_out"] + sum(dropped(stats).values())
    files = sorted((tmp_path / "docs").glob("part-*.parquet"))
    assert files and files[0].name.endswith("-of-00001.parquet")
    rows = kept_rows(tmp_path / "docs")
    assert [(r["id"], r["text"]) for r in rows] == [
        ("raw/a.jsonl#1", "first document here"),
        ("raw/b.jsonl#1", "second document"),
    ]
    assert json.loads((tmp_path / "docs" / ".stats.json").read_text())["documents_out"] == 2
    assert not list((tmp_path / "docs").glob(".staging-*"))
    rejects = []
    for part in sorted((tmp_path / "rejects").glob("rejects-*.jsonl.gz")):
        with gzip.open(part, "rt") as f:
            rejects.extend(json.loads(line) for line in f)
    assert sorted(r["reason"] for r in rejects) == sorted(
        k.removeprefix("dropped.") for k in dropped(stats)
    )
    short = next(r for r in rejects if r["reason"] == "length.too_short")
    assert short["text"] == "x" and short["id"].endswith("a.jsonl#4")
    assert json.loads((tmp_path / "rejects" / "rejects.json").read_text()) == dropped(stats)


def _peak_rss_reset() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def test_a_200_mb_document_is_counted_and_never_held(tmp_path) -> None:
    raw = tmp_path / "raw" / "big.jsonl"
    raw.parent.mkdir()
    with raw.open("wb") as f:
        f.write(b'{"text": "a normal document"}\n{"text": "')
        block = b"spam " * (1 << 20)
        for _ in range(40):  # 200 MiB of text in one record
            f.write(block)
        f.write(b'"}\n{"text": "another normal document"}\n')
    if not _peak_rss_reset():
        pytest.skip("cannot reset the peak RSS counter here")
    before = _status_kb("VmRSS")
    stats = run_clean(CleanConfig(inputs=[str(raw)], output=str(tmp_path / "docs")))
    grown_mb = (_status_kb("VmHWM") - before) / 1024
    assert (stats["documents_in"], stats["documents_out"], dropped(stats)) == (
        3,
        2,
        {"dropped.too_long": 1},
    )
    assert [r["id"] for r in kept_rows(tmp_path / "docs")] == ["raw/big.jsonl#1", "raw/big.jsonl#3"]
    assert grown_mb < 120, f"peak RSS grew by {grown_mb:.0f} MB reading a 200 MB record"


def test_ids_do_not_depend_on_how_the_input_is_spelled(tmp_path, monkeypatch) -> None:
    raw = tmp_path / "data" / "raw"
    write_jsonl(raw / "sub" / "a.jsonl", [{"text": "one document"}, {"text": "another"}])
    monkeypatch.chdir(tmp_path / "data")
    spellings = ["raw", "./raw/", str(raw), str(raw / "sub" / "*.jsonl"), "raw/../raw"]
    seen = []
    for i, spelling in enumerate(spellings):
        run_clean(CleanConfig(inputs=[spelling], output=str(tmp_path / f"docs-{i}")))
        seen.append(sorted((r["id"], r["source"]) for r in kept_rows(tmp_path / f"docs-{i}")))
    assert seen[0] == [
        ("raw/sub/a.jsonl#1", "raw/sub/a.jsonl"),
        ("raw/sub/a.jsonl#2", "raw/sub/a.jsonl"),
    ]
    assert all(s == seen[0] for s in seen[1:3] + seen[4:])
    assert seen[3][0][0] == "sub/a.jsonl#1"  # a glob starts below its directory part
    (tmp_path / "other" / "raw" / "sub").mkdir(parents=True)
    (tmp_path / "other" / "raw" / "sub" / "a.jsonl").write_text('{"text": "x"}\n')
    with pytest.raises(BadInputError, match=r"would both be named raw/sub/a\.jsonl"):
        run_clean(CleanConfig(inputs=["raw", str(tmp_path / "other" / "raw")], output="o"))


def test_split_reads_give_the_ids_of_a_whole_read(tmp_path) -> None:
    raw = tmp_path / "raw"
    records = [{"text": f"document number {i} " + "pad " * (i % 7)} for i in range(60)]
    write_jsonl(raw / "a.jsonl", records)
    (raw / "b.txt").write_text("".join(f"block {i}\nmore {i}\n\n\n" for i in range(40)))
    results = {}
    for chunk in (1 << 20, 97):
        out = tmp_path / f"docs-{chunk}"
        results[chunk] = run_clean(
            CleanConfig(inputs=[str(raw)], output=str(out), doc_sep="blank", chunk_bytes=chunk)
        )
        results[chunk]["rows"] = [_id_and_text(r) for r in kept_rows(out)]
    assert results[97]["rows"] == results[1 << 20]["rows"]
    assert len(results[97]["rows"]) == 100
    assert ("raw/b.txt#5", "block 1\nmore 1") in results[97]["rows"]


def test_every_format_and_compression(tmp_path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    line = b'{"body": "compressed text here"}\n'
    (raw / "a.jsonl.gz").write_bytes(gzip.compress(line))
    (raw / "b.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(line))
    (raw / "c.jsonl.bz2").write_bytes(bz2.compress(line))
    (raw / "d.jsonl.xz").write_bytes(lzma.compress(line))
    pq.write_table(pa.table({"body": ["from parquet", "row two"]}), raw / "e.parquet")
    pq.write_table(pa.table({"body": ["gzipped parquet"]}), tmp_path / "f.parquet")
    (raw / "f.parquet.gz").write_bytes(gzip.compress((tmp_path / "f.parquet").read_bytes()))
    stats = run_clean(
        CleanConfig(inputs=[str(raw)], output=str(tmp_path / "docs"), text_field="body")
    )
    assert stats["documents_out"] == 7 and stats["files"] == 6
    ids = [r["id"] for r in kept_rows(tmp_path / "docs")]
    assert "raw/e.parquet#2" in ids and "raw/f.parquet.gz#1" in ids


COMPRESSORS = {
    "gz": gzip.compress,
    "zst": zstandard.ZstdCompressor().compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
}


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_a_truncated_compressed_file_is_an_error_never_a_short_read(
    tmp_path, capsys, suffix
) -> None:
    # 3,000 records cut at 70%: a reader that stops where the bytes stop would "clean" fewer
    # documents and exit 0.
    line = '{"text": "record %d %s"}\n'
    records = "".join(line % (i, "word " * 20) for i in range(3000))
    whole = COMPRESSORS[suffix](records.encode())
    broken = tmp_path / "raw" / f"broken.jsonl.{suffix}"
    broken.parent.mkdir()
    broken.write_bytes(whole[: int(len(whole) * 0.7)])
    code = main(["clean", "--input", str(broken), "--output", str(tmp_path / "docs")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and f"broken.jsonl.{suffix}: cannot read" in err and "\n" not in err
    assert not (tmp_path / "docs" / ".stats.json").exists()


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_an_empty_compressed_file_is_an_error_naming_it(tmp_path, capsys, suffix) -> None:
    # what a failed download leaves; gzip and zstd alone would read it as no records
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "good.jsonl").write_text('{"text": "a document that is fine"}\n')
    (raw / f"empty.jsonl.{suffix}").write_bytes(b"")
    code = main(["clean", "--input", str(raw), "--output", str(tmp_path / "docs")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    assert err.endswith(
        f"empty.jsonl.{suffix}: empty compressed file (zero bytes; not even a header)"
    )
    assert not (tmp_path / "docs" / ".stats.json").exists()


def test_a_file_name_that_is_not_utf8_is_one_line(tmp_path, capsys) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "good.jsonl").write_text('{"text": "a document that is fine"}\n')
    with open(os.path.join(os.fsencode(raw), b"bad\xff.jsonl"), "wb") as f:
        f.write(b'{"text": "a document in a file with a Latin-1 name"}\n')
    code = main(["clean", "--input", str(raw), "--output", str(tmp_path / "docs")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err[-800:]
    assert err.endswith(
        "bad\\xff.jsonl: the file name is not UTF-8, so it cannot name documents; rename it"
    )
    assert not (tmp_path / "docs").exists()


@pytest.mark.parametrize("kind", ["FIFO", "socket"])
def test_an_input_that_is_not_a_regular_file_is_refused_not_opened(tmp_path, capsys, kind) -> None:
    import socket

    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "good.jsonl").write_text('{"text": "a document that is fine"}\n')
    special = raw / "special.jsonl"
    if kind == "FIFO":
        os.mkfifo(special)  # opening it would block until a writer comes: never
    else:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(special))
    code = main(["clean", "--input", str(raw), "--output", str(tmp_path / "docs")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err[-800:]
    assert err.endswith(f"special.jsonl: a {kind}, not a regular file; inputs must be files")
    assert not (tmp_path / "docs").exists()


def test_a_text_field_that_matches_no_record_is_an_error_not_an_empty_store(
    tmp_path, capsys
) -> None:
    raw = tmp_path / "raw" / "a.jsonl"
    raw.parent.mkdir()
    raw.write_text("".join(json.dumps({"body": f"document {i}"}) + "\n" for i in range(50)))
    out = tmp_path / "docs"
    code = main(["clean", "--input", str(raw), "--output", str(out), "--text-field", "text"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "none of the 50 records has a text field 'text'" in err
    assert not (out / ".stats.json").exists() and not list(out.glob(".staging-*"))
    # One record with the field is a corpus with 49 bad records: counted, not fatal.
    with raw.open("a") as f:
        f.write(json.dumps({"text": "one real document here"}) + "\n")
    assert main(["clean", "--input", str(raw), "--output", str(out)]) == 0
    assert json.loads((out / ".stats.json").read_text())["dropped.missing_text"] == 50


def test_bad_files_are_one_line_errors_naming_them(tmp_path, capsys) -> None:
    with pytest.raises(BadInputError, match="nothing-here"):
        run_clean(CleanConfig(inputs=[str(tmp_path / "nothing-here")], output=str(tmp_path / "o")))
    broken = tmp_path / "raw" / "broken.jsonl.gz"
    broken.parent.mkdir()
    broken.write_bytes(gzip.compress(b'{"text": "x"}\n' * 1000)[:-40])
    code = main(["clean", "--input", str(broken), "--output", str(tmp_path / "docs")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "broken.jsonl.gz: cannot read" in err and "\n" not in err
    assert not (tmp_path / "docs" / ".stats.json").exists()
    assert not list((tmp_path / "docs").glob(".staging-*"))
    with pytest.raises(UsageError, match="unknown filter"):
        run_clean(CleanConfig(inputs=[str(broken)], output=str(tmp_path / "o"), filters=["c5"]))


def test_cli_filter_flags_reach_the_filters(tmp_path, capsys) -> None:
    write_jsonl(tmp_path / "raw" / "a.jsonl", [{"text": "short"}, {"text": "a bit longer"}])
    code = main(
        [
            "clean",
            "--input",
            str(tmp_path / "raw"),
            "--output",
            str(tmp_path / "docs"),
            "--filters",
            "length",
            "--min-chars",
            "8",
        ]
    )
    assert code == 0
    stats = json.loads((tmp_path / "docs" / ".stats.json").read_text())
    assert stats["filters"]["length"]["min_chars"] == 8
    assert dropped(stats) == {"dropped.length.too_short": 1}


def test_a_dangling_symlink_is_counted_by_reason(tmp_path, capsys) -> None:
    raw = tmp_path / "raw"
    write_jsonl(raw / "a.jsonl", [{"text": "a document that is here"}])
    (raw / "gone.jsonl").symlink_to(tmp_path / "deleted.jsonl")
    (raw / "sub").mkdir()
    (raw / "sub" / "gone.txt").symlink_to("nowhere")
    assert main(["clean", "--input", str(raw), "--output", str(tmp_path / "docs")]) == 0
    stats = json.loads((tmp_path / "docs" / ".stats.json").read_text())
    first = [str(raw / "gone.jsonl"), str(raw / "sub" / "gone.txt")]
    assert stats["skipped_files"] == {"dangling_symlink": {"count": 2, "first": first}}
    assert stats["files"] == 1 and stats["documents_out"] == 1
    err = capsys.readouterr().err
    assert f"skipped 2 input file(s) as dangling_symlink, e.g. {first[0]}" in err
    # Nothing to skip: an empty record, so a reader need not ask whether the key exists.
    clean = ["clean", "--input", str(raw / "a.jsonl"), "--output", str(tmp_path / "docs2")]
    assert main(clean) == 0
    assert json.loads((tmp_path / "docs2" / ".stats.json").read_text())["skipped_files"] == {}


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file, whatever its mode")
def test_an_unreadable_file_is_counted_by_reason_not_fatal(tmp_path) -> None:
    raw = tmp_path / "raw"
    write_jsonl(raw / "a.jsonl", [{"text": "a document that is here"}])
    write_jsonl(raw / "secret.jsonl", [{"text": "a document nobody may read"}])
    (raw / "secret.jsonl").chmod(0)
    try:
        stats = run_clean(CleanConfig(inputs=[str(raw)], output=str(tmp_path / "docs")))
    finally:
        (raw / "secret.jsonl").chmod(0o644)
    assert stats["skipped_files"] == {
        "unreadable": {"count": 1, "first": [str(raw / "secret.jsonl")]}
    }
    assert stats["documents_out"] == 1


def test_a_file_without_the_text_field_among_others_is_named_not_dropped(tmp_path, capsys) -> None:
    """Mixed inputs (issue 34): a jsonl whose text field is `content` beside txt and jsonl
    files that clean fine was 'kept 2997, dropped 710' with every record of it dropped."""
    raw = tmp_path / "raw"
    write_jsonl(raw / "good.jsonl", [{"text": f"a document number {i}"} for i in range(5)])
    (raw / "notes.txt").write_text("a text file that is one document\n")
    write_jsonl(raw / "other.jsonl", [{"content": f"text {i}", "id": i} for i in range(4)])
    out = tmp_path / "docs"
    assert main(["clean", "--input", str(raw), "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "cloze clean: error: raw/other.jsonl: none of the 4 records has a text field 'text' "
        "(their fields: content, id); set --text-field to the field that holds the text, "
        "or --fields 'raw/other.jsonl:text=FIELD' for this file alone"
    )
    assert not (out / ".stats.json").exists()
