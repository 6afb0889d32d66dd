"""Inputs placed by what they are, per file (Wikimedia's dump names, WARC by its first
bytes, --format per pattern), files no reader knows named and skipped, damaged files
skipped and named with --on-bad-file skip."""

from __future__ import annotations

import bz2
import gzip
import json
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clozeworks.cli import main
from clozeworks.corpus.text.placing import (
    FormatRule,
    format_by_content,
    format_by_name,
    parse_format_rules,
)

HANGUL = "한국어 문서는 형태소 분석을 거쳐 어휘를 만든다. 문장이 여럿 있다.\n"


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("dumps/enwiki-latest-pages-articles1.xml-p000000010p000030302.bz2", "mediawiki"),
        ("dumps/enwiki-latest-pages-articles1.xml-p000000010p000030302", "mediawiki"),
        ("kowiki-20261101-pages-articles-multistream.xml.bz2", "mediawiki"),
        ("kowiki-20261101-pages-meta-current.xml.gz", "mediawiki"),
        ("enwiki-latest-pages-articles27.xml-p69474495p70974494.bz2", "mediawiki"),
        ("CC-MAIN-20261101-00001.warc.gz", "warc"),
        ("CC-MAIN-20261101-00001.warc.wet.gz", "wet"),
        ("a/b.JSONL.zst", "jsonl"),
        ("corpus.TXT", "txt"),
        ("x.warc.gz.bad", None),
        ("README", None),
        ("abstract.xml", None),
        ("kowiki-20261101-pages-articles-multistream-index.txt.bz2", "txt"),
    ],
)
def test_names_say_what_they_can(name, fmt) -> None:
    assert format_by_name(name) == fmt


def test_first_bytes_say_the_rest(tmp_path) -> None:
    from tests.corpus.text.test_web import CRAWL, write_warc

    warc = gzip.decompress(write_warc(tmp_path / "c.warc.gz", CRAWL[:1]))
    assert format_by_content(warc[:4096]) == "warc"
    wet = b"WARC/1.0\r\nWARC-Type: warcinfo\r\nWARC-Filename: CC-MAIN-1.warc.wet.gz\r\n"
    assert format_by_content(wet) == "wet"
    assert format_by_content(b'<?xml version="1.0"?>\n<mediawiki xmlns="x">') == "mediawiki"
    assert format_by_content(b"\xef\xbb\xbf  <!DOCTYPE html><html>") == "html"
    assert format_by_content(b'{"text": "a"}\n{"text": "b"}\n') == "jsonl"
    cut = HANGUL.encode() * 3
    assert format_by_content(cut[:-1]) == "txt"  # a syllable cut by the head's end
    assert format_by_content(b"PAR1\x15\x04") == "parquet"
    assert format_by_content(b"ARROW1\x00\x00") == "arrow"
    # Compressed data under a name that does not say so, binary data, unknown markup.
    assert format_by_content(gzip.compress(b"WARC/1.0\r\n")) is None
    assert format_by_content(b"\x89PNG\r\n\x1a\n\x00\x00") is None
    assert format_by_content(b"<feed><doc>x</doc></feed>") is None
    assert format_by_content(HANGUL.encode("cp949")) is None


def test_format_rules_parse_and_refuse() -> None:
    assert parse_format_rules("warc") == (FormatRule("*", "warc"),)
    rules = parse_format_rules("raw/a/*:jsonl; raw/*.dat:txt")
    assert [r.to_text() for r in rules] == ["raw/a/*:jsonl", "raw/*.dat:txt"]
    with pytest.raises(ValueError, match="'pdf' is not a format"):
        parse_format_rules("raw/*:pdf")


def _page(page_id: int, title: str, text: str) -> str:
    return (
        f"<page><title>{title}</title><ns>0</ns><id>{page_id}</id><revision><id>1</id>"
        f'<text xml:space="preserve">{text}</text></revision></page>\n'
    )


def _dump(pages: list[str]) -> bytes:
    return (
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11">\n'
        "<siteinfo><sitename>Wikipedia</sitename></siteinfo>\n" + "".join(pages) + "</mediawiki>\n"
    ).encode()


def _clean(tmp_path: Path, capsys, *flags: str) -> tuple[int, dict, str]:
    out = tmp_path / "docs"
    argv = ["clean", "--input", str(tmp_path / "raw"), "--output", str(out), "--no-progress"]
    code = main([*argv, *flags])
    err = capsys.readouterr().err
    stats = json.loads((out / ".stats.json").read_text()) if code == 0 else {}
    return code, stats, err


def _texts(tmp_path: Path) -> dict[str, str]:
    rows = pq.read_table(tmp_path / "docs").to_pylist()
    return {row["source"]: row["text"] for row in rows}


def test_a_mixed_directory_is_read_file_by_file(tmp_path, capsys) -> None:
    pytest.importorskip("mwparserfromhell")
    pytest.importorskip("fastwarc")
    from tests.corpus.text.test_web import CRAWL, write_warc

    raw = tmp_path / "raw"
    article = "The '''engine''' was designed by Charles Babbage in the nineteenth century."
    split = raw / "enwiki-latest-pages-articles1.xml-p000000010p000030302.bz2"
    split.parent.mkdir(parents=True)
    split.write_bytes(bz2.compress(_dump([_page(12, "Engine", article)])))
    # A crawl whose files are numbered, not named: a WARC by its first bytes.
    write_warc(raw / "crawl" / "segment-00001.gz", CRAWL[:1])
    (raw / "notes").write_text(HANGUL * 3, encoding="utf-8")
    (raw / "x.warc.gz.bad").write_bytes(gzip.compress(b"WARC/1.0\r\n"))
    index = raw / "enwiki-latest-pages-articles-multistream-index.txt.bz2"
    index.write_bytes(bz2.compress(b"600:10:AccessibleComputing\n600:12:Anarchism\n"))

    code, stats, err = _clean(tmp_path, capsys)
    assert code == 0, err
    assert stats["formats"] == {"mediawiki": 1, "txt": 1, "warc": 1}
    texts = _texts(tmp_path)
    assert texts["raw/" + split.name] == article.replace("'''", "")
    assert "quick brown fox" in texts["raw/crawl/segment-00001.gz"]
    assert texts["raw/notes"] == (HANGUL * 3).strip()
    unknown = stats["skipped_files"]["unknown_format"]
    assert unknown["count"] == 2
    assert unknown["first"] == [str(index), str(raw / "x.warc.gz.bad")]
    assert "x.warc.gz.bad: no reader knows this format" in unknown["errors"][1]
    assert "skipped 2 input file(s) as unknown_format" in err
    assert "Traceback" not in err


def test_format_is_given_per_pattern(tmp_path, capsys) -> None:
    raw = tmp_path / "raw"
    (raw / "a").mkdir(parents=True)
    (raw / "b").mkdir()
    # Records in JSON lines under a name that says text, beside real text files.
    (raw / "a" / "part.txt").write_text('{"text": "from a json line"}\n', encoding="utf-8")
    (raw / "b" / "page.txt").write_text('{"text": "stays text"}\n', encoding="utf-8")
    code, stats, err = _clean(tmp_path, capsys, "--format", "raw/a/*:jsonl")
    assert code == 0, err
    assert stats["formats"] == {"jsonl": 1, "txt": 1}
    texts = _texts(tmp_path)
    assert texts == {
        "raw/a/part.txt": "from a json line",
        "raw/b/page.txt": '{"text": "stays text"}',
    }
    code, _, err = _clean(tmp_path, capsys, "--format", "raw/a/*:pdf")
    assert code == 2 and err.count("\n") == 1 and "'pdf' is not a format" in err, err


def test_only_unknown_files_is_one_line(tmp_path, capsys) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "photo.dat").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    code, _, err = _clean(tmp_path, capsys)
    assert code != 0 and err.count("\n") == 1, err
    assert "none of the 1 input file(s) can be read" in err and "photo.dat" in err


def _damaged_inputs(raw: Path) -> None:
    pytest.importorskip("fastwarc")
    from tests.corpus.text.test_web import CRAWL, write_warc

    (raw / "good").mkdir(parents=True)
    (raw / "good" / "a.jsonl").write_text('{"text": "a good record"}\n' * 2, encoding="utf-8")
    data = write_warc(raw / "crawl" / "CC-MAIN-1.warc.gz", CRAWL)
    (raw / "crawl" / "CC-MAIN-1.warc.gz").write_bytes(data[:-40])  # cut in its gzip data
    pq.write_table(pa.table({"text": ["x"] * 10}), raw / "good.parquet")
    (raw / "bad.parquet").write_bytes(b"PAR1" + b"\x00" * 40)
    (raw / "blob.gz").write_bytes(zlib.compress(b"not gzip at all") + b"\x1f\x8b")  # not gzip


def test_damaged_files_stop_the_run_by_default(tmp_path, capsys) -> None:
    _damaged_inputs(tmp_path / "raw")
    code, _, err = _clean(tmp_path, capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "docs").exists()


def test_damaged_files_are_counted_named_and_passed_with_skip(tmp_path, capsys) -> None:
    raw = tmp_path / "raw"
    _damaged_inputs(raw)
    code, stats, err = _clean(tmp_path, capsys, "--on-bad-file", "skip")
    assert code == 0, err
    damaged = stats["skipped_files"]["damaged"]
    names = [raw / "bad.parquet", raw / "blob.gz", raw / "crawl" / "CC-MAIN-1.warc.gz"]
    assert damaged["count"] == 3 and damaged["first"] == [str(p) for p in names]
    errors = zip(damaged["errors"], names, strict=True)
    assert all(e.split(": ", 1)[0].endswith(p.name) for e, p in errors), damaged["errors"]
    assert "skipped 3 input file(s) as damaged, e.g. " + str(names[0]) in err
    texts = _texts(tmp_path)
    assert texts["raw/good/a.jsonl"] == "a good record"
    # The WARC's records before the cut are kept, as documented; none of the others'.
    assert any(source.startswith("raw/crawl/") for source in texts)
    assert not any(s.startswith(("raw/bad", "raw/blob")) for s in texts)
    assert "Traceback" not in err
