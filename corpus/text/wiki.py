"""MediaWiki XML dumps (`pages-articles.xml[.bz2]`): one document per article, the text
passages BERT kept (`wikitext.passages`).

Articles are the pages of namespace 0 that are not redirects. The dump is parsed as it
streams (elements cleared as they are read), so memory stays flat on a dump of any size.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from clozeworks.corpus.text.records import RawDocument, ReadOptions, Rejected, make_id
from clozeworks.corpus.text.wikitext import TooComplex, passages
from clozeworks.schemas.errors import BadInputError, SettingError


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
        except TooComplex as err:
            yield Rejected("too_complex", source, page.page_id, f"{page.title}: {err}")
            continue
        except Exception as err:  # mwparserfromhell raises bare errors on wikitext it cannot parse
            yield Rejected("bad_wikitext", source, page.page_id, f"{page.title}: {err}")
            continue
        if not text:
            yield Rejected("empty_text", source, page.page_id, page.title)
            continue
        meta = json.dumps({"page_id": page.page_id, "title": page.title}, ensure_ascii=False)
        yield RawDocument(make_id(source, page.page_id), text, source, meta)


# --- multistream dumps ---------------------------------------------------------------------
# `pages-articles-multistream.xml.bz2` is many bz2 streams of about 100 pages each, so a
# dump splits into byte ranges read in parallel (the way text files are split): a range
# reads every stream that starts inside it, the last one past its end. A stream starts
# with bz2's header and its first block's magic, byte-aligned: `BZh` + level + 0x314159265359.
_STREAM_START = re.compile(rb"BZh[1-9]1AY&SY")
_SCAN_BYTES = 1 << 20


def read_mediawiki_streams(
    raw: IO[bytes], source: str, options: ReadOptions | None, start: int, end: int | None
) -> Iterator[RawDocument | Rejected]:
    """The articles of the bz2 streams starting in [start, end) of a dump's raw bytes, each
    stream decompressed as it is parsed (a single-stream dump of any size included)."""
    offset = _next_stream(raw, start, end)
    while offset is not None and (end is None or offset < end):
        stream = _StreamXML(raw, offset, source)
        yield from read_mediawiki(stream, source, options)  # type: ignore[arg-type]
        offset = stream.next_offset


def _next_stream(raw: IO[bytes], start: int, end: int | None) -> int | None:
    """Where the first stream at or after `start` begins (None if none before `end`)."""
    raw.seek(start)
    position, tail = start, b""
    while end is None or position < end + 16:
        chunk = raw.read(_SCAN_BYTES)
        if not chunk:
            return None
        data = tail + chunk
        found = _STREAM_START.search(data)
        if found:
            at = position - len(tail) + found.start()
            return at if end is None or at < end else None
        tail, position = data[-16:], position + len(chunk)
    return None


_CLOSE = b"</mediawiki>"


class _StreamXML:
    """One bz2 stream of a dump as a well-formed XML document, decompressed as it is read:
    the first stream holds `<mediawiki>` and the site info, the last the closing tag, the
    others only pages, so a synthetic root is added where the stream has none and the
    closing tag is always the stream's own last bytes. `next_offset` is where the next
    stream starts (None at the end of the file), known once this one is read."""

    def __init__(self, raw: IO[bytes], offset: int, source: str) -> None:
        import bz2

        self.raw, self.offset, self.source = raw, offset, source
        self.position = offset
        self.decompressor = bz2.BZ2Decompressor()
        self.buffer = bytearray()
        self.carry = b""  # the tail that may hold the start of a closing tag
        self.started = False
        self.finished = False
        self.next_offset: int | None = None
        raw.seek(offset)

    def read(self, size: int = -1) -> bytes:
        while not self.finished and (size < 0 or len(self.buffer) < size or not self.started):
            self._fill()
        if size < 0:
            size = len(self.buffer)
        data = bytes(self.buffer[:size])
        del self.buffer[:size]  # a bytearray drops its head without copying the rest
        return data

    def _fill(self) -> None:
        chunk = b""
        if self.decompressor.needs_input:
            chunk = self.raw.read(_SCAN_BYTES)
            if not chunk:
                problem = f"the bz2 stream at byte {self.offset} is cut short"
                raise BadInputError(f"{self.source}: {problem}")
            self.position += len(chunk)
        try:
            # At most 1 MiB out per call: Wikipedia's text is ~5x compressible, generated
            # text far more, and all of a chunk's output at once would be held at once.
            data = self.decompressor.decompress(chunk, max_length=_SCAN_BYTES)
        except OSError as err:
            problem = f"a damaged bz2 stream at byte {self.offset} ({err})"
            raise BadInputError(f"{self.source}: {problem}") from None
        data = (self.carry + data).replace(_CLOSE, b"")
        if self.decompressor.eof:
            self.finished = True
            following = self.position - len(self.decompressor.unused_data)
            self.raw.seek(following)
            self.next_offset = following if self.raw.read(4) else None
            self.carry, data = b"", data + _CLOSE
        else:
            keep = len(_CLOSE) - 1
            self.carry, data = data[-keep:], data[:-keep]
        if not self.started:
            # Decide the root once the head is in: the first stream brings its own.
            self.buffer += data
            if len(self.buffer) < 4096 and not self.finished:
                return
            self.started = True
            if b"<mediawiki" not in self.buffer[:4096]:
                self.buffer[:0] = b"<mediawiki>"
            return
        self.buffer += data
