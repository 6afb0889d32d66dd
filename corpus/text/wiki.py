"""MediaWiki XML dumps (`pages-articles.xml[.bz2]`): one document per article, the text
passages BERT kept (`wikitext.passages`).

Articles are the pages of namespace 0 that are not redirects. The dump is parsed as it
streams, and a page's text is kept only up to the record limit, so memory stays flat on a
dump of any size and whatever one page holds.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any
from xml.parsers import expat

from clozeworks.corpus.text.records import RawDocument, ReadOptions, Rejected, make_id
from clozeworks.corpus.text.wikitext import TooComplex, passages
from clozeworks.schemas.errors import BadInputError, SettingError


@dataclass(frozen=True)
class Page:
    page_id: int
    title: str
    namespace: int
    redirect: bool
    text: str  # "" when `too_long`
    # The text was longer than the reader's limit: it streamed past, never held.
    too_long: bool = False


def require_parser() -> None:
    """SettingError when mwparserfromhell is not installed (the [wiki] extra)."""
    import importlib.util

    if importlib.util.find_spec("mwparserfromhell") is None:
        raise SettingError(
            "fmt", "mediawiki needs mwparserfromhell: pip install 'clozeworks[wiki]'"
        )


# Bytes of the dump read at a time, and the most a page's title, namespace or id may hold.
_READ_BYTES = 1 << 20
_FIELD_BYTES = 1 << 16
_NO_LIMIT = 1 << 62


class _Pages:
    """expat's handlers: the pages of a dump as they end, each field's text collected only
    up to its limit (a page's text up to the record limit), the rest dropped as it is read."""

    def __init__(self, max_text_bytes: int) -> None:
        self.max_text_bytes = max_text_bytes
        self.path: list[str] = []
        self.done: list[Page] = []
        self.fields: dict[str, Any] = {}
        self.parts: list[str] | None = None
        self.size = self.limit = 0
        self.over = False

    def start(self, name: str, attrs: Any) -> None:
        parent = self.path[-1] if self.path else ""
        self.path.append(name)
        if name == "page":
            self.fields = {"redirect": False, "text": "", "too_long": False}
        elif parent == "page" and name in ("title", "ns", "id") and name not in self.fields:
            self._collect(_FIELD_BYTES)
        elif parent == "page" and name == "redirect":
            self.fields["redirect"] = True
        elif parent == "revision" and name == "text" and self.path[-3:-2] == ["page"]:
            self._collect(self.max_text_bytes)

    def _collect(self, limit: int) -> None:
        self.parts, self.size, self.limit, self.over = [], 0, limit, False

    def data(self, text: str) -> None:
        if self.parts is None or self.over:
            return
        self.size += len(text.encode("utf-8", "surrogatepass"))
        if self.size > self.limit:
            self.over, self.parts = True, []  # the rest streams past, never held
            return
        self.parts.append(text)

    def end(self, name: str) -> None:
        self.path.pop()
        if self.parts is not None and name in ("title", "ns", "id", "text"):
            value = "".join(self.parts)
            if name == "text":  # a history dump's revisions: the last one's
                self.fields.update(text=value, too_long=self.over)
            else:
                self.fields[name] = value.strip()
            self.parts = None
        elif name == "page":
            page = self.fields
            # A page without a numeric id is not one the dump format makes: left out.
            with contextlib.suppress(KeyError, ValueError):
                self.done.append(
                    Page(int(page["id"]), page.get("title", ""), int(page.get("ns", 0)),
                         page["redirect"], page["text"], page["too_long"])
                )  # fmt: skip
            self.fields = {}


def iter_pages(stream: IO[bytes], source: str, max_text_bytes: int = _NO_LIMIT) -> Iterator[Page]:
    """The pages of a dump, in order, parsed as the bytes stream in (expat, its
    protections against entity expansion); a page's text past `max_text_bytes` is dropped
    as it is read (`too_long`), so memory is bounded whatever one page claims.
    BadInputError naming the file and the line for XML that does not parse (a truncated
    dump ends that way)."""
    pages = _Pages(max_text_bytes)
    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.buffer_size = 1 << 16
    parser.StartElementHandler = pages.start
    parser.EndElementHandler = pages.end
    parser.CharacterDataHandler = pages.data
    while True:
        chunk = stream.read(_READ_BYTES)
        try:
            parser.Parse(chunk, not chunk)
        except expat.ExpatError as err:
            raise BadInputError(
                f"{source}: the XML breaks off or is malformed at line {err.lineno}, column "
                f"{err.offset} ({expat.ErrorString(err.code)})"
            ) from None
        yield from pages.done
        pages.done.clear()
        if not chunk:
            return


def read_mediawiki(
    stream: IO[bytes], source: str, options: ReadOptions | None = None
) -> Iterator[RawDocument | Rejected]:
    """Articles of a dump as documents (`{source}#{page id}`, meta `page_id` and `title`);
    other namespaces, redirects and articles with no passages are counted, not kept."""
    import json

    options = options or ReadOptions()
    for page in iter_pages(stream, source, options.max_record_bytes):
        if page.namespace != 0:
            yield Rejected("not_an_article", source, page.page_id, f"namespace {page.namespace}")
            continue
        if page.redirect:
            yield Rejected("redirect", source, page.page_id, page.title)
            continue
        if page.too_long:
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
