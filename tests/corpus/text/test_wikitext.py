"""Wikitext to BERT's text passages, read from mwparserfromhell's token stream: each
construct kept or left out as MediaWiki renders it."""

from __future__ import annotations

import pytest

pytest.importorskip("mwparserfromhell")

from clozeworks.corpus.text.wikitext import passages

CASES = [
    # Links: the anchor, else the target; media, category and language links left out,
    # with whatever a caption holds.
    ("a [[b]] [[c|d]] [[File:x.jpg|thumb|cap [[e]]]] [[Category:Z]] [[de:Y]] [[:fr:W]] f",
     "a b d f"),
    ("[http://a.example t ''u''] [http://b.example] http://c.example v", "t u v"),
    ("{{a|b={{c}}|[[d]]}}x{{{arg|default}}}y<!-- z -->", "xy"),
    ("x &amp; &#x41; &#66; &eacute;", "x & A B é"),
    # Tags: prose tags kept, references, tables and the rest left out, attributes never text.
    ('<span style="{{s}}">kept</span> <ref name="r">{{cite}}</ref><ref name="q"/> <div>no</div>',
     "kept"),
    ("<li>an item</li> rest of its line\nnext line", "next line"),
    # Lists and indents: the whole line, what it links to included.
    ("* x [[y|z]] w\n# n\n; term : def\n:indent [[k]]\nprose", "prose"),
    ("== Heading ==\npara one\n\npara two\n{|\n| cell\n|}\n__NOTOC__", "para one\npara two"),
    # A `<` that opens no tag MediaWiki knows is text (mwparserfromhell would try each one
    # as a tag and scan ahead for its end).
    ("if a < b and <user@host> or <tag1>x</tag1>, ''c''",
     "if a < b and <user@host> or <tag1>x</tag1>, c"),
]  # fmt: skip


@pytest.mark.parametrize(("wikitext", "expected"), CASES)
def test_each_construct_is_kept_or_left_out(wikitext: str, expected: str) -> None:
    assert passages(wikitext) == expected


def test_many_stray_angle_brackets_keep_all_text() -> None:
    text = " ".join(f"x{i} < y{i} <name{i}@host>" for i in range(3000))
    assert passages(text) == text
