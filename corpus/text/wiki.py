"""MediaWiki XML dumps (`pages-articles.xml[.bz2]`): one document per article, the text
passages BERT kept.

BERT's paper: "For Wikipedia we extract only the text passages and ignore lists, tables, and
headers." Articles are the pages of namespace 0 that are not redirects. Wikitext is parsed
with mwparserfromhell (the parser pywikibot and most Wikipedia tools use); of its nodes the
plain text, bold and italic runs, link anchors (a link without one: its target) and external
link titles are kept, and templates, headings, comments, references, tables, math, galleries
and other extension tags, list and indent lines, and file, image and category links are
left out. Each paragraph is one line (as wikiextractor writes them). The dump is parsed as
it streams (elements cleared as they are read), so memory stays flat on a dump of any size.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from clozeworks.corpus.text.records import RawDocument, ReadOptions, Rejected, make_id
from clozeworks.schemas.errors import BadInputError, SettingError

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
_SWITCH = re.compile(r"__[A-Z]+__")
_SPACES = re.compile(r"[ \t\u00a0]+")


@dataclass(frozen=True)
class Page:
    page_id: int
    title: str
    namespace: int
    redirect: bool
    text: str


def require_parser() -> None:
    """SettingError when mwparserfromhell is not installed (the [wiki] extra)."""
    import importlib.util

    if importlib.util.find_spec("mwparserfromhell") is None:
        raise SettingError(
            "fmt", "mediawiki needs mwparserfromhell: pip install 'clozeworks[wiki]'"
        )


def iter_pages(stream: IO[bytes], source: str) -> Iterator[Page]:
    """The pages of a dump, in order; BadInputError naming the file and the line for XML
    that does not parse (a truncated dump ends that way)."""
    try:
        events = ET.iterparse(stream, events=("start", "end"))
        root: Any = None
        for event, elem in events:
            if root is None:
                root = elem
            if event != "end" or _local(elem.tag) != "page":
                continue
            page = _page(elem)
            elem.clear()
            root.clear()  # the pages read so far: memory stays flat
            if page is not None:
                yield page
    except ET.ParseError as err:
        line, column = getattr(err, "position", (0, 0))
        raise BadInputError(
            f"{source}: the XML breaks off or is malformed at line {line}, column {column} "
            f"({err.msg if hasattr(err, 'msg') else err})"
        ) from None


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _page(elem: Any) -> Page | None:
    fields: dict[str, Any] = {"redirect": False, "text": ""}
    for child in elem:
        name = _local(child.tag)
        if name in ("title", "ns", "id") and name not in fields:
            fields[name] = (child.text or "").strip()
        elif name == "redirect":
            fields["redirect"] = True
        elif name == "revision":
            for part in child:
                if _local(part.tag) == "text":
                    fields["text"] = part.text or ""
    try:
        return Page(
            int(fields["id"]),
            fields.get("title", ""),
            int(fields.get("ns", 0)),
            fields["redirect"],
            fields["text"],
        )
    except (KeyError, ValueError):
        return None  # a page without a numeric id: not one the dump format makes


def read_mediawiki(
    stream: IO[bytes], source: str, options: ReadOptions | None = None
) -> Iterator[RawDocument | Rejected]:
    """Articles of a dump as documents (`{source}#{page id}`, meta `page_id` and `title`);
    other namespaces, redirects and articles with no passages are counted, not kept."""
    import json

    options = options or ReadOptions()
    for page in iter_pages(stream, source):
        if page.namespace != 0:
            yield Rejected("not_an_article", source, page.page_id, f"namespace {page.namespace}")
            continue
        if page.redirect:
            yield Rejected("redirect", source, page.page_id, page.title)
            continue
        if len(page.text.encode("utf-8")) > options.max_record_bytes:
            yield Rejected("too_long", source, page.page_id, page.title)
            continue
        try:
            text = passages(page.text)
        except Exception as err:  # mwparserfromhell raises bare errors on wikitext it cannot parse
            yield Rejected("bad_wikitext", source, page.page_id, f"{page.title}: {err}")
            continue
        if not text:
            yield Rejected("empty_text", source, page.page_id, page.title)
            continue
        meta = json.dumps({"page_id": page.page_id, "title": page.title}, ensure_ascii=False)
        yield RawDocument(make_id(source, page.page_id), text, source, meta)


def passages(wikitext: str) -> str:
    """The text passages of an article's wikitext, one paragraph a line."""
    import mwparserfromhell

    code = mwparserfromhell.parse(wikitext)
    out: list[str] = []
    _walk(code.nodes, out, top=True)
    text = _SWITCH.sub("", "".join(out))
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        lines = [_SPACES.sub(" ", line).strip() for line in block.splitlines()]
        paragraph = " ".join(line for line in lines if line)
        if paragraph:
            paragraphs.append(paragraph)
    return "\n".join(paragraphs)


def _walk(nodes: Any, out: list[str], top: bool = False) -> None:
    from mwparserfromhell import nodes as n

    skipping_line = False  # inside a list or indent line, until its end
    for node in nodes:
        if isinstance(node, n.Text):
            text = str(node.value)
            if skipping_line:
                if "\n" not in text:
                    continue
                text, skipping_line = text[text.index("\n") :], False
            out.append(text)
        elif skipping_line:
            continue
        elif isinstance(node, n.Tag):
            tag = str(node.tag).lower().strip()
            if top and tag in LIST_TAGS:
                skipping_line = True
            elif tag not in SKIPPED_TAGS and tag not in LIST_TAGS and node.contents is not None:
                _walk(node.contents.nodes, out)
        elif isinstance(node, n.Wikilink):
            if not DROPPED_LINKS.match(str(node.title)):
                _walk((node.text or node.title).nodes, out)
        elif isinstance(node, n.ExternalLink):
            if node.title is not None:
                _walk(node.title.nodes, out)
        elif isinstance(node, n.HTMLEntity):
            out.append(node.normalize())
        # Templates, headings, comments, arguments: left out.
