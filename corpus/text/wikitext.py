"""The text passages of an article's wikitext: what BERT kept of Wikipedia.

BERT's paper: "For Wikipedia we extract only the text passages and ignore lists, tables, and
headers." Wikitext is tokenized by mwparserfromhell's C tokenizer (the parser pywikibot and
most Wikipedia tools use) and its token stream is read here in one pass, without the node
tree `mwparserfromhell.parse` builds from it only to be thrown away; the tokenizer itself
is now most of the time an article takes. Of the tokens the plain text, bold and
italic runs, link anchors (a link without one: its target) and external link titles are
kept; templates, arguments, headings, comments, references, tables, math, galleries and
other extension tags, list and indent lines, and file, image and category links are left
out. Each paragraph is one line (as wikiextractor writes them).
"""

from __future__ import annotations

import re
from typing import Any

# Tags whose whole content is left out: BERT's "lists, tables", and what is not prose.
SKIPPED_TAGS = frozenset(
    {"ref", "references", "table", "math", "chem", "gallery", "timeline", "score", "graph",
     "syntaxhighlight", "source", "pre", "code", "imagemap", "mapframe", "templatedata",
     "noinclude", "includeonly", "nowiki", "sup", "sub", "div", "center", "br", "hr",
     "blockquote", "poem", "hiero", "categorytree", "inputbox", "indicator"}
)  # fmt: skip
# The wiki markup of list and indent lines (`*`, `#`, `;`, `:`): the line is left out.
LIST_TAGS = frozenset({"li", "dt", "dd"})
# Link targets that are not text: media, categories, and links to other wikis' languages.
DROPPED_LINKS = re.compile(
    r"^\s*:?\s*(?:(?i:file|image|media|category)\s*:|[a-z]{2,3}(?:-[a-z]+)?:)"
)
# The tags MediaWiki knows: its sanitizer's HTML elements and the extension tags Wikipedia
# runs. Any other `<` is text to MediaWiki, but mwparserfromhell tries it as a tag and scans
# ahead for where it ends, so a page with many (`a < b`, `<user@host>`) took quadratic time
# (0.36 MB/s on one 88 KB page against 25 MB/s for the median page). Those are escaped to
# `&lt;` first, which renders back to `<`.
MARKUP_TAGS = SKIPPED_TAGS | LIST_TAGS | frozenset(
    {"abbr", "b", "bdi", "bdo", "big", "caption", "cite", "data", "del", "dfn", "dl", "em",
     "font", "h1", "h2", "h3", "h4", "h5", "h6", "i", "ins", "kbd", "link", "mark", "meta",
     "ol", "p", "q", "rb", "rp", "rt", "rtc", "ruby", "s", "samp", "small", "span", "strike",
     "strong", "td", "th", "time", "tr", "tt", "u", "ul", "var", "wbr", "ce", "maplink",
     "onlyinclude", "section", "templatestyles", "charinsert", "phonos", "langconvert"}
)  # fmt: skip
_TAG_NAMES = "|".join(sorted(MARKUP_TAGS, key=len, reverse=True))
_NOT_MARKUP = re.compile(rf"<(?!!--|/?(?:{_TAG_NAMES})(?=[\s/>]))", re.IGNORECASE)
# Extension tags whose content MediaWiki takes raw up to the first closing tag, and
# comments: all left out, so they are cut before tokenizing (a real article's references
# are much of its bytes) with the same first-closing-tag rule MediaWiki applies. A tag that
# is never closed is left to the tokenizer.
_RAW_TAGS = "ref|math|chem|ce|nowiki|pre|syntaxhighlight|source|gallery|timeline|score|graph"
_RAW_TAGS += "|templatedata|hiero|imagemap|mapframe|maplink|templatestyles|inputbox|categorytree"
_CUT = re.compile(
    rf"<!--.*?-->|<({_RAW_TAGS})(?:\s[^<>]*)?(?:/>|>.*?</\1\s*>)", re.IGNORECASE | re.DOTALL
)
_SWITCH = re.compile(r"__[A-Z]+__")
# Tags left open make mwparserfromhell's tokenizer quadratic: 4,000 unclosed `<span>`
# take 1.3 s, 16,000 `<div>` 20 s. Real articles close theirs; a page with more open than
# this is `too_complex` (a few milliseconds at the limit).
MAX_UNCLOSED_TAGS = 256
# Tags the tokenizer closes itself (HTML's optional end tags) cost nothing left open.
_VOID_TAGS = frozenset({"wbr", "meta", "link", "li", "dt", "dd", "td", "th", "tr"})
_OPENED = re.compile(rf"<({_TAG_NAMES})(?=[\s/>])[^<>]*?(/?)>", re.IGNORECASE)
_CLOSED = re.compile(rf"</({_TAG_NAMES})\s*>", re.IGNORECASE)


class TooComplex(ValueError):
    """Wikitext whose parse would take time out of proportion to its size."""


def unclosed_tags(wikitext: str) -> int:
    """How many of the tags MediaWiki knows are opened and not closed (by name)."""
    opened: dict[str, int] = {}
    for match in _OPENED.finditer(wikitext):
        name = match.group(1).lower()
        if not match.group(2) and name not in _VOID_TAGS:
            opened[name] = opened.get(name, 0) + 1
    for match in _CLOSED.finditer(wikitext):
        name = match.group(1).lower()
        opened[name] = opened.get(name, 0) - 1
    return sum(max(0, n) for n in opened.values())


_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def passages(wikitext: str) -> str:
    """The text passages of an article's wikitext, one paragraph a line. TooComplex past
    MAX_UNCLOSED_TAGS tags left open."""
    wikitext = _NOT_MARKUP.sub("&lt;", _CUT.sub("", wikitext))
    unclosed = unclosed_tags(wikitext)
    if unclosed > MAX_UNCLOSED_TAGS:
        raise TooComplex(f"{unclosed} tags left open (more than {MAX_UNCLOSED_TAGS})")
    text = _SWITCH.sub("", _render(_tokenize(wikitext)))
    paragraphs = []
    for block in _PARAGRAPH_BREAK.split(text):
        paragraph = " ".join(block.split())
        if paragraph:
            paragraphs.append(paragraph)
    return "\n".join(paragraphs)


def _tokenize(wikitext: str) -> list[Any]:
    try:
        from mwparserfromhell.parser._tokenizer import CTokenizer as Tokenizer
    except ImportError:  # a build without the C extension: its Python tokenizer, same tokens
        from mwparserfromhell.parser.tokenizer import Tokenizer
    return Tokenizer().tokenize(wikitext, 0, False)


def _kinds() -> dict[type, int]:
    from mwparserfromhell.parser import tokens as t

    kinds: dict[type, int] = {t.Text: TEXT}
    for name in ("TemplateOpen", "ArgumentOpen", "CommentStart", "HeadingStart"):
        kinds[getattr(t, name)] = DROP_OPEN
    for name in ("TemplateClose", "ArgumentClose", "CommentEnd", "HeadingEnd"):
        kinds[getattr(t, name)] = DROP_CLOSE
    kinds.update({
        t.WikilinkOpen: LINK_OPEN, t.WikilinkSeparator: LINK_SEP, t.WikilinkClose: LINK_CLOSE,
        t.ExternalLinkOpen: EXT_OPEN, t.ExternalLinkSeparator: EXT_SEP,
        t.ExternalLinkClose: EXT_CLOSE,
        t.HTMLEntityStart: ENTITY_OPEN, t.HTMLEntityNumeric: ENTITY_NUMERIC,
        t.HTMLEntityHex: ENTITY_HEX, t.HTMLEntityEnd: ENTITY_CLOSE,
        t.TagOpenOpen: TAG_OPEN, t.TagAttrStart: TAG_ATTRS, t.TagCloseOpen: TAG_CONTENT,
        t.TagCloseSelfclose: TAG_SELFCLOSE, t.TagOpenClose: TAG_END, t.TagCloseClose: TAG_CLOSE,
    })  # fmt: skip
    return kinds  # the rest (template parameters, attribute quotes and equals): no text


(TEXT, DROP_OPEN, DROP_CLOSE, LINK_OPEN, LINK_SEP, LINK_CLOSE, EXT_OPEN, EXT_SEP, EXT_CLOSE,
 ENTITY_OPEN, ENTITY_NUMERIC, ENTITY_HEX, ENTITY_CLOSE, TAG_OPEN, TAG_ATTRS, TAG_CONTENT,
 TAG_SELFCLOSE, TAG_END, TAG_CLOSE) = range(1, 20)  # fmt: skip
_KINDS: dict[type, int] = {}


class _Frame:
    """An open construct: where text went before it (None: nowhere) and what it collects."""

    __slots__ = ("first", "hexadecimal", "numeric", "outer", "second")

    def __init__(self, outer: list[str] | None) -> None:
        self.outer = outer
        self.first: list[str] = []  # a link's target, a tag's or an entity's name
        self.second: list[str] | None = None  # a link's anchor, an external link's title
        self.numeric = self.hexadecimal = False


def _render(tokens: list[Any]) -> str:
    """The kept text of a token stream. `sink` is where text goes now (None: dropped), each
    open construct a frame on `stack`; a list line drops what follows it on its line."""
    if not _KINDS:
        _KINDS.update(_kinds())
    kinds = _KINDS
    root: list[str] = []
    sink: list[str] | None = root
    stack: list[_Frame] = []
    naming: list[str] | None = None  # a tag's or an entity's name being read
    skipping_line = False
    for token in tokens:
        kind = kinds.get(type(token), 0)
        if kind == TEXT:
            if naming is not None:
                naming.append(token["text"])
            elif sink is not None:
                sink.append(token["text"])
            elif skipping_line and not stack:
                text = token["text"]
                at = text.find("\n")
                if at >= 0:
                    skipping_line, sink = False, root
                    root.append(text[at:])
        elif kind == DROP_OPEN:
            stack.append(_Frame(sink))
            sink = None
        elif kind == LINK_OPEN:
            frame = _Frame(sink)
            stack.append(frame)
            sink = frame.first if sink is not None else None
        elif kind == EXT_OPEN:
            stack.append(_Frame(sink))
            sink = None  # the URL
        elif kind in (LINK_SEP, EXT_SEP):  # a link's anchor, an external link's title
            frame = stack[-1]
            frame.second = []
            sink = frame.second if frame.outer is not None else None
        elif kind in (TAG_OPEN, ENTITY_OPEN):
            frame = _Frame(sink)
            stack.append(frame)
            naming, sink = frame.first, None
        elif kind == TAG_ATTRS:
            naming = None
        elif kind == TAG_CONTENT:
            frame = stack[-1]
            naming = None
            tag = "".join(frame.first).lower().strip()
            if len(stack) == 1 and tag in LIST_TAGS:
                skipping_line = True
            kept = tag not in SKIPPED_TAGS and tag not in LIST_TAGS
            sink = frame.outer if kept else None
        elif kind == TAG_SELFCLOSE:
            frame = stack.pop()
            naming = None
            if not stack and "".join(frame.first).lower().strip() in LIST_TAGS:
                skipping_line = True
            sink = None if skipping_line and not stack else frame.outer
        elif kind == TAG_END:
            sink = None  # the closing tag's name
        elif kind == ENTITY_NUMERIC:
            stack[-1].numeric = True
        elif kind == ENTITY_HEX:
            stack[-1].hexadecimal = True
        elif kind in (DROP_CLOSE, LINK_CLOSE, EXT_CLOSE, ENTITY_CLOSE, TAG_CLOSE):
            if not stack:
                continue  # a closer without its opener: the tokenizer does not make one
            frame = stack.pop()
            naming, sink = None, frame.outer
            if skipping_line and not stack:
                sink = None
            if sink is None:
                continue
            if kind == LINK_CLOSE:
                if not DROPPED_LINKS.match("".join(frame.first)):
                    sink.extend(frame.first if frame.second is None else frame.second)
            elif kind == EXT_CLOSE:
                sink.extend(frame.second or ())
            elif kind == ENTITY_CLOSE:
                sink.append(_entity(frame))
    return "".join(root)


def _entity(frame: _Frame) -> str:
    from mwparserfromhell.nodes import HTMLEntity

    value = "".join(frame.first)
    entity = HTMLEntity(value, named=not frame.numeric, hexadecimal=frame.hexadecimal)
    return str(entity.normalize())
