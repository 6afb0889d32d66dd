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


@pytest.mark.parametrize("tag", ["div", "span", "b"])
def test_tags_left_open_are_too_complex_in_near_linear_time(tag) -> None:
    """mwparserfromhell is quadratic in tags left open (16,000 `<div>`: 20 s); past the
    budget a page is refused before it is tokenized, so time grows with the text only."""
    import time

    from clozeworks.corpus.text.wikitext import MAX_UNCLOSED_TAGS, TooComplex, unclosed_tags

    assert unclosed_tags(f"<{tag}>a</{tag}> <{tag}/> <li>x <td>y") == 0
    assert passages(f"x <{tag}>" * MAX_UNCLOSED_TAGS)  # at the budget: parsed
    seconds = []
    for n in (4_000, 16_000, 64_000):
        start = time.perf_counter()
        with pytest.raises(TooComplex, match=f"{n} tags left open"):
            passages("x " + f"<{tag}>" * n)
        seconds.append(time.perf_counter() - start)
    # 16x the text in no more than 16x the time, with room for a shared machine's noise
    # (quadratic would be 256x); and fast in absolute terms.
    assert seconds[2] < 40 * max(seconds[0], 1e-3) and seconds[2] < 2.0, seconds
