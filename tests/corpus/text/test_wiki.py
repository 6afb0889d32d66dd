"""MediaWiki dumps (issue 35, item 1, first part): articles only, BERT's text passages, ids
and titles kept, a broken dump named."""

from __future__ import annotations

import bz2
import json
from dataclasses import replace
from pathlib import Path
from xml.sax.saxutils import escape

import pyarrow.parquet as pq
import pytest

from clozeworks.cli import main

pytest.importorskip("mwparserfromhell")

ADA = """{{Infobox person|name=Ada|birth={{birth date|1815|12|10}}}}
'''Ada Lovelace''' was an English [[mathematician]] and [[Writer|writer]].<ref>{{cite}}</ref>
She worked on [[Charles Babbage]]'s ''Analytical Engine''.

== Early life ==
Her father was [[Lord Byron]]. See [http://example.com the site] &amp; more.
* a list item
* another [[item]]
# numbered
: indented text
{| class="wikitable"
|-
! Header
|-
| cell [[one]]
|}
[[File:Ada.jpg|thumb|A portrait of [[Ada]]]]
[[Category:Mathematicians]]
[[de:Ada Lovelace]]
<!-- a comment -->
__NOTOC__
Final paragraph with <math>x^2</math> and a <ref name="a"/> reference."""

PASSAGES = (
    "Ada Lovelace was an English mathematician and writer. She worked on Charles Babbage's "
    "Analytical Engine.\n"
    "Her father was Lord Byron. See the site & more.\n"
    "Final paragraph with and a reference."
)


def _page(page_id: int, title: str, text: str, ns: int = 0, redirect: str = "") -> str:
    extra = f'<redirect title="{escape(redirect)}" />' if redirect else ""
    return (
        f"<page><title>{escape(title)}</title><ns>{ns}</ns><id>{page_id}</id>{extra}"
        f'<revision><id>{page_id + 1000}</id><text xml:space="preserve">{escape(text)}</text>'
        "</revision></page>\n"
    )


def dump(path: Path, pages: list[str], cut: int | None = None) -> Path:
    xml = (
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11">\n'
        "<siteinfo><sitename>Wikipedia</sitename></siteinfo>\n" + "".join(pages) + "</mediawiki>\n"
    ).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bz2.compress(xml[:cut] if cut else xml))
    return path


def test_articles_become_their_text_passages(tmp_path, capsys) -> None:
    dump(
        tmp_path / "wiki" / "enwiki-test-pages-articles.xml.bz2",
        [
            _page(12, "Ada Lovelace", ADA),
            _page(13, "Lovelace", "#REDIRECT [[Ada Lovelace]]", redirect="Ada Lovelace"),
            _page(14, "Talk:Ada Lovelace", "A talk page paragraph.", ns=1),
            _page(15, "Engine", "The '''engine''' was never built.\n\nIt was designed."),
            _page(16, "List of things", "* only a list\n* of items\n{{navbox}}"),
        ],
    )
    out = tmp_path / "docs"
    argv = ["clean", "--input", str(tmp_path / "wiki"), "--output", str(out), "--no-progress"]
    assert main(argv) == 0, capsys.readouterr().err
    stats = json.loads((out / ".stats.json").read_text())
    assert stats["documents_in"] == 5 and stats["documents_out"] == 2
    assert stats["dropped.redirect"] == 1 and stats["dropped.not_an_article"] == 1
    assert stats["dropped.empty_text"] == 1  # a page that is all list and template
    rows = {r["id"]: r for r in pq.read_table(out).to_pylist()}
    ada = rows["wiki/enwiki-test-pages-articles.xml.bz2#12"]
    assert ada["text"] == PASSAGES
    assert json.loads(ada["meta"]) == {"page_id": 12, "title": "Ada Lovelace"}
    engine = rows["wiki/enwiki-test-pages-articles.xml.bz2#15"]["text"]
    assert engine == "The engine was never built.\nIt was designed."


def test_a_cut_dump_is_one_line_naming_it(tmp_path, capsys) -> None:
    pages = [_page(i, f"Page {i}", f"Paragraph of page {i}.") for i in range(1, 50)]
    path = dump(tmp_path / "wiki" / "x-pages-articles.xml.bz2", pages, cut=3000)
    out = tmp_path / "docs"
    assert main(["clean", "--input", str(path.parent), "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "x-pages-articles.xml.bz2" in err and "line 2" in err, err
    # Cut inside the compressed bytes: the stream is named by its offset.
    whole = dump(path, pages).read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    assert main(["clean", "--input", str(path.parent), "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "bz2 stream at byte 0 is cut short" in err, err
    assert not out.exists() or not (out / ".stats.json").exists()


def test_a_multistream_dump_is_read_by_ranges_and_gives_the_same_documents(tmp_path) -> None:
    """Wikipedia's -multistream dumps: every few pages a bz2 stream of its own, the first
    holding the site info and the last the closing tag. Read in ranges of 150 bytes (a
    dozen tasks, each reading the streams that start in it) the documents are those of the
    same XML uncompressed."""
    from clozeworks.pipelines.clean import CleanConfig, run_clean

    pages = [
        _page(i, f"Page {i}", f"'''Page {i}''' is about [[thing {i}]].\n\nMore.")
        for i in range(1, 31)
    ]
    header = (
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11">\n'
        "<siteinfo><sitename>Wikipedia</sitename></siteinfo>\n"
    )
    groups = ["".join(pages[k : k + 4]) for k in range(0, 30, 4)]
    streams = [header, *groups, "</mediawiki>\n"]
    multi = tmp_path / "multi" / "enwiki-x-pages-articles-multistream.xml.bz2"
    multi.parent.mkdir()
    multi.write_bytes(b"".join(bz2.compress(s.encode()) for s in streams))
    plain = tmp_path / "plain" / "enwiki-x-pages-articles-multistream.xml"
    plain.parent.mkdir()
    plain.write_text("".join(streams))
    out = {}
    for name, chunk in (("multi", 150), ("plain", 1 << 20)):
        config = CleanConfig(inputs=[str(tmp_path / name)], output=str(tmp_path / f"{name}-d"))
        stats = run_clean(replace(config, chunk_bytes=chunk))
        assert stats["documents_out"] == 30
        rows = pq.read_table(tmp_path / f"{name}-d").to_pylist()
        out[name] = sorted((r["id"].split("#")[1], r["text"], r["meta"]) for r in rows)
    assert out["multi"] == out["plain"]
    assert multi.stat().st_size > 1500  # so the 150-byte ranges are many


def test_a_page_past_the_record_limit_is_never_held(tmp_path) -> None:
    """A few hundred bytes of bz2 can claim a page of 64 MiB: it streams past, counted as
    too_long, and the reader's memory stays within a few MiB of the limit."""
    import io
    import tracemalloc

    from clozeworks.corpus.text.records import ReadOptions
    from clozeworks.corpus.text.wiki import read_mediawiki

    huge = "a" * (64 << 20)
    xml = (
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/">\n'
        f"{_page(7, 'Huge', huge)}{_page(8, 'Small', 'A short article of some words.')}"
        "</mediawiki>\n"
    ).encode()
    packed = bz2.compress(xml)
    del huge, xml
    assert len(packed) < 1000
    stream = bz2.BZ2File(io.BytesIO(packed))
    tracemalloc.start()
    try:
        records = list(read_mediawiki(stream, "d.xml.bz2", ReadOptions(max_record_bytes=1 << 20)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [getattr(r, "reason", "kept") for r in records] == ["too_long", "kept"]
    assert peak < 8 << 20, f"peak {peak / 2**20:.1f} MiB"
