"""Web crawls (issue 35, item 2): Common Crawl WARC responses through the extractor, WET text
as it is, HTML files; URL, date and language kept; what is not a page counted; a cut file
counted or named."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clozeworks.cli import main

pytest.importorskip("fastwarc")
pytest.importorskip("resiliparse")
pytest.importorskip("warcio")

ARTICLE = (
    "<p>The quick brown fox jumps over the lazy dog, again and again, for the test's sake.</p>"
    "<p>A second paragraph of the article holds more of its text: enough for an extractor to "
    "take it for the main content of the page rather than for boilerplate.</p>"
)


def page(lang: str = "de", body: str = ARTICLE) -> bytes:
    return (
        f"<html lang='{lang}'><head><title>T</title><script>var x = 1;</script></head><body>"
        "<nav><ul><li><a href='/'>Home</a></li><li><a href='/a'>About</a></li></ul></nav>"
        f"<article>{body}</article><footer>Copyright footer</footer></body></html>"
    ).encode()


def write_warc(path: Path, records: list[tuple], gz: bool = True) -> bytes:
    """records: (kind, url, media, body, status, extra WARC headers)."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=gz)
    writer.write_record(writer.create_warcinfo_record(path.name, {"software": "test"}))
    for kind, url, media, body, status, extra in records:
        if kind == "response":
            http = StatusAndHeaders(status, [("Content-Type", media)], protocol="HTTP/1.1")
            record = writer.create_warc_record(
                url, "response", payload=io.BytesIO(body), http_headers=http
            )
        else:
            record = writer.create_warc_record(
                url, kind, payload=io.BytesIO(body), warc_content_type=media
            )
        for name, value in extra.items():
            record.rec_headers.add_header(name, value)
        writer.write_record(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue())
    return buf.getvalue()


CRAWL = [
    ("response", "https://a.example/1", "text/html; charset=utf-8", page("de"), "200 OK", {}),
    ("request", "https://a.example/1", "application/http; msgtype=request",
     b"GET / HTTP/1.1\r\n\r\n", None, {}),
    ("response", "https://a.example/2", "text/html", page("ko"), "404 Not Found", {}),
    ("response", "https://a.example/3.png", "image/png", b"\x89PNG\r\n", "200 OK", {}),
    ("response", "https://a.example/4", "text/html; charset=iso-8859-1",
     page("fr", "<p>" + "Caf\xe9 cr\xe8me, une phrase assez longue pour \xeatre le texte. " * 4
          + "</p>").decode("utf-8").encode("latin-1"), "200 OK", {}),
    ("metadata", "https://a.example/4", "application/warc-fields", b"fetchTimeMs: 3\r\n", None, {}),
]  # fmt: skip


def clean(tmp_path: Path, *extra: str) -> tuple[dict, dict]:
    out = tmp_path / "docs"
    argv = ["clean", "--input", str(tmp_path / "crawl"), "--output", str(out), "--no-progress"]
    assert main([*argv, *extra]) == 0
    stats = json.loads((out / ".stats.json").read_text())
    return {r["id"]: r for r in pq.read_table(out).to_pylist()}, stats


def test_warc_responses_become_their_main_text_with_url_date_and_language(tmp_path) -> None:
    write_warc(tmp_path / "crawl" / "CC-MAIN-x.warc.gz", CRAWL)
    rows, stats = clean(tmp_path)
    assert stats["documents_in"] == 4  # the responses; request, metadata, warcinfo are not pages
    assert stats["dropped.http_status"] == 1 and stats["dropped.not_html"] == 1
    # Ids number every record of the file: warcinfo is 1, the first response 2.
    assert sorted(rows) == ["crawl/CC-MAIN-x.warc.gz#2", "crawl/CC-MAIN-x.warc.gz#6"]
    first = rows["crawl/CC-MAIN-x.warc.gz#2"]
    assert first["text"].startswith("The quick brown fox")
    assert "A second paragraph" in first["text"]
    for boilerplate in ("Home", "About", "Copyright", "var x"):
        assert boilerplate not in first["text"]
    meta = json.loads(first["meta"])
    assert meta["url"] == "https://a.example/1" and meta["language"] == "de"
    assert meta["date"].startswith("20")  # WARC-Date, ISO 8601
    # The charset the server declared decodes the page.
    assert "Café crème" in rows["crawl/CC-MAIN-x.warc.gz#6"]["text"]


def test_wet_conversion_records_are_taken_as_they_are(tmp_path) -> None:
    text = "Line one of the page's text.\nLine two, as Common Crawl extracted it."
    records = [
        ("conversion", "https://b.example/", "text/plain", text.encode(), None,
         {"WARC-Identified-Content-Language": "eng,deu"}),
    ]  # fmt: skip
    write_warc(tmp_path / "crawl" / "CC-MAIN-y.warc.wet.gz", records)
    rows, _ = clean(tmp_path)
    (row,) = rows.values()
    assert row["text"] == text
    assert json.loads(row["meta"])["language"] == "eng,deu"


def test_html_files_through_the_same_extractor(tmp_path) -> None:
    (tmp_path / "crawl").mkdir()
    (tmp_path / "crawl" / "index.html").write_bytes(page("ja"))
    rows, _ = clean(tmp_path)
    (row,) = rows.values()
    assert row["id"] == "crawl/index.html#1" and row["text"].startswith("The quick brown fox")
    assert json.loads(row["meta"]) == {"language": "ja"}


def test_trafilatura_can_be_chosen(tmp_path) -> None:
    pytest.importorskip("trafilatura")
    write_warc(tmp_path / "crawl" / "CC-MAIN-x.warc.gz", CRAWL[:1])
    rows, _ = clean(tmp_path, "--extractor", "trafilatura")
    (row,) = rows.values()
    assert "quick brown fox" in row["text"] and "Copyright" not in row["text"]


def test_a_warc_cut_inside_its_gzip_data_is_one_line_naming_it(tmp_path, capsys) -> None:
    data = write_warc(tmp_path / "crawl" / "CC-MAIN-x.warc.gz", CRAWL)
    (tmp_path / "crawl" / "CC-MAIN-x.warc.gz").write_bytes(data[:-40])
    out = tmp_path / "docs"
    argv = ["clean", "--input", str(tmp_path / "crawl"), "--output", str(out), "--no-progress"]
    assert main(argv) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "CC-MAIN-x.warc.gz" in err[0], err
    assert "breaks off or is damaged in or after record 7" in err[0], err  # the last is cut
    assert "Traceback" not in err[0] and not out.exists()


def test_an_uncompressed_record_cut_short_is_counted(tmp_path) -> None:
    data = write_warc(tmp_path / "crawl" / "CC-MAIN-x.warc", CRAWL[:1], gz=False)
    (tmp_path / "crawl" / "CC-MAIN-x.warc").write_bytes(data[:-120])
    rows, stats = clean(tmp_path)
    assert rows == {} and stats["dropped.truncated_record"] == 1


@pytest.mark.parametrize("into", [4, 12, 40, 80])
def test_a_record_cut_in_its_header_is_counted_or_one_line(tmp_path, capsys, into) -> None:
    data = write_warc(tmp_path / "crawl" / "CC-MAIN-x.warc", CRAWL, gz=False)
    starts = [i for i in range(len(data)) if data.startswith(b"WARC/1.", i)]
    cut = starts[4] + into  # inside the header of record 5, after 4 whole records
    (tmp_path / "crawl" / "CC-MAIN-x.warc").write_bytes(data[:cut])
    if into < len(b"WARC/1.0"):
        # Not even the version line: FastWARC's "Invalid WARC header", one line naming it.
        out = tmp_path / "docs"
        argv = ["clean", "--input", str(tmp_path / "crawl"), "--output", str(out)]
        assert main([*argv, "--no-progress"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "CC-MAIN-x.warc" in err[0] and "record 4" in err[0], err
        return
    rows, stats = clean(tmp_path)
    assert stats["dropped.truncated_record"] == 1, stats
    assert sorted(rows) == ["crawl/CC-MAIN-x.warc#2"]  # the records before it, as whole


def test_a_metadata_record_cut_short_is_counted(tmp_path) -> None:
    data = write_warc(tmp_path / "crawl" / "CC-MAIN-x.warc", CRAWL, gz=False)
    (tmp_path / "crawl" / "CC-MAIN-x.warc").write_bytes(data[:-10])  # into the last body
    rows, stats = clean(tmp_path)
    assert stats["dropped.truncated_record"] == 1, stats
    assert len(rows) == 2


def test_the_format_is_found_by_name() -> None:
    from clozeworks.corpus.text.placing import format_by_name

    assert format_by_name("x/CC-MAIN-1.warc.gz") == "warc"
    assert format_by_name("x/CC-MAIN-1.warc.wet.gz") == "wet"
    assert format_by_name("x/page.HTML") == "html" and format_by_name("x/p.htm.zst") == "html"
