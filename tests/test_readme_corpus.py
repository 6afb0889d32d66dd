"""The README's "From my corpus to a model" starts from a Wikipedia dump and a WARC file
(issue 35, item 6): its commands run as written, on a small dump and crawl made here."""

from __future__ import annotations

import json

import pytest

from clozeworks.cli import main
from tests.corpus.text.test_web import page, write_warc
from tests.corpus.text.test_wiki import ADA, _page, dump
from tests.readme import cloze_commands

pytest.importorskip("mwparserfromhell")
pytest.importorskip("fastwarc")
pytest.importorskip("py3langid")

ENGLISH = "".join(
    f"<p>{p}</p>"
    for p in (
        "The printing press came to Europe in the middle of the fifteenth century. Before "
        "it, every book was copied by hand, which took months and cost a great deal.",
        "Johannes Gutenberg combined movable metal type, an oil-based ink and a wooden press "
        "adapted from those used to make wine. His workshop in Mainz printed a Bible.",
        "Within fifty years there were presses in more than two hundred towns. Printers "
        "sold grammars, calendars, sermons and news sheets to a growing number of readers.",
        "Cheaper books changed how people learned. Scholars could compare the same text in "
        "distant cities, and mistakes could be corrected in the next edition.",
    )
)


def test_the_readme_starts_from_a_wikipedia_dump_and_a_warc_file(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    dump(tmp_path / "enwiki-latest-pages-articles-multistream.xml.bz2", [_page(12, "Ada", ADA)])
    crawl = [("response", "https://c.example/", "text/html", page("en", ENGLISH), "200 OK", {})]
    write_warc(tmp_path / "crawl" / "CC-MAIN-1.warc.gz", crawl)
    ran = cloze_commands("## From my corpus to a model")
    assert [c[1] for c in ran] == ["clean", "clean", "dedup", "inspect"]
    for argv in ran:
        assert main([*argv[1:], "--no-progress"] if argv[1] != "inspect" else argv[1:]) == 0
    stats = json.loads((tmp_path / "work" / "docs" / ".stats.json").read_text())
    assert stats["documents_out"] == 2  # the article and the page
    web = json.loads((tmp_path / "work" / "web" / ".stats.json").read_text())
    assert web["documents_out"] == 1, web
