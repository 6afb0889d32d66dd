"""NamuWiki's JSON dumps (`namuwiki_20210301.json`): one JSON array of pages,
`{"namespace", "title", "text", "contributors"}` each, several gigabytes in one file.

The array is never loaded whole. Its pages are cut apart where one object closes and the
next opens (`},{"`): inside a JSON string a quote is always escaped, so those bytes occur
only between pages, and each page is parsed alone (json.loads, one page in memory).
The same cut lets an uncompressed dump be read in byte ranges by many workers, as the
MediaWiki reader reads a multistream dump: a range reads the pages whose opening brace
lies inside it, the last one past its end.

Articles (namespace 0) become documents, `{source}#{title}`, meta `title` and
`namespace`, their namumark rendered to plain passages (corpus/text/namumark.py);
redirects (`#redirect`, `#넘겨주기`) are counted as `dropped.redirect`, other namespaces
as `dropped.not_an_article`. A file that is not such an array, breaks off inside a page or
holds broken JSON is one line naming the file, the byte and the last page read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import IO, Any

from clozeworks.corpus.text.namumark import is_redirect, render
from clozeworks.corpus.text.records import RawDocument, ReadOptions, Rejected, make_id
from clozeworks.schemas.errors import BadInputError

_BOUNDARY = re.compile(rb"\}\s*,\s*\{(?=\s*\")")
_READ_BYTES = 1 << 20
# A boundary's whitespace may straddle two reads: search again this far back.
_OVERLAP = 256
ARTICLES = 0


def read_namuwiki(
    stream: IO[bytes], source: str, options: ReadOptions, start: int = 0, end: int | None = None
) -> Iterator[RawDocument | Rejected]:
    """The pages whose opening brace lies in [start, end) of the dump (all of it by default)."""
    last = "(it is the first)"
    for offset, raw in _pages(stream, source, start, end, options.max_record_bytes):
        if raw is None:
            yield Rejected("too_long", source, offset, f"longer than {options.max_record_bytes}")
            continue
        page = _parse(raw, source, offset, last)
        last = repr(page["title"])
        yield _document(page, source, offset)


def _pages(
    stream: IO[bytes], source: str, start: int, end: int | None, limit: int
) -> Iterator[tuple[int, bytes | None]]:
    """(byte offset, the page's JSON, or None past `limit`) of each page starting in range."""
    buffer, base = bytearray(), start
    if start == 0:
        buffer += stream.read(_READ_BYTES)
        head = bytes(buffer[:16]).lstrip(b"\xef\xbb\xbf \t\r\n")
        if not head.startswith(b"["):
            raise BadInputError(f"{source}: not a NamuWiki dump: it does not start with '['")
        opening = buffer.find(b"[") + 1
        while opening < len(buffer) and buffer[opening] in b" \t\r\n":
            opening += 1
        if buffer[opening : opening + 1] == b"]":
            return
        del buffer[:opening]
        base = opening
    else:
        found = _first_page(stream, start, end)
        if found is None:
            return
        stream.seek(found)
        base = found
    # `base`: the file offset of buffer[0], which is the page's `{` unless it grew too long.
    page_start, searched, too_long = base, 0, False
    while True:
        match = _BOUNDARY.search(buffer, searched)
        if match is None:
            chunk = stream.read(_READ_BYTES)
            if not chunk:
                yield page_start, None if too_long else _last_page(buffer, source, page_start)
                return
            too_long = too_long or len(buffer) > limit
            if too_long:  # keep only what a boundary may start in
                drop = max(0, len(buffer) - _OVERLAP)
                del buffer[:drop]
                base += drop
            searched = max(0, len(buffer) - _OVERLAP)
            buffer += chunk
            continue
        yield page_start, None if too_long else bytes(buffer[: match.start() + 1])
        following = base + match.end() - 1
        if end is not None and following >= end:
            return
        del buffer[: match.end() - 1]
        base = page_start = following
        searched, too_long = 0, False


def _first_page(stream: IO[bytes], start: int, end: int | None) -> int | None:
    """The offset of the first page's `{` at or after `start` (None if none before `end`)."""
    position = max(0, start - _OVERLAP)
    stream.seek(position)
    data = b""
    while end is None or position + len(data) < end + _OVERLAP:
        chunk = stream.read(_READ_BYTES)
        if not chunk:
            return None
        data += chunk
        for match in _BOUNDARY.finditer(data):
            at = position + match.end() - 1
            if at >= start:
                return at if end is None or at < end else None
        keep = data[-_OVERLAP:]
        position += len(data) - len(keep)
        data = keep
    return None


def _last_page(buffer: bytearray, source: str, base: int) -> bytes:
    """The last page: the bytes before the array's closing `]`."""
    body = bytes(buffer).rstrip()
    if not body.endswith(b"]"):
        raise BadInputError(
            f"{source}: the dump breaks off inside the page at byte {base} (no closing ']')"
        )
    return body[:-1].rstrip()


def _parse(raw: bytes, source: str, offset: int, last: str) -> dict[str, Any]:
    try:
        page = json.loads(raw)
    except (ValueError, RecursionError) as err:
        problem = "nested too deeply" if isinstance(err, RecursionError) else str(err)
        raise BadInputError(
            f"{source}: broken JSON in the page at byte {offset} after page {last} ({problem})"
        ) from None
    if not isinstance(page, dict) or not isinstance(page.get("title"), str):
        raise BadInputError(
            f"{source}: not a NamuWiki page at byte {offset} (after page {last}): no string 'title'"
        )
    return page


def _document(page: dict[str, Any], source: str, offset: int) -> RawDocument | Rejected:
    title = page["title"]
    text = page.get("text")
    namespace = page.get("namespace")
    if str(namespace).strip() != str(ARTICLES):
        return Rejected("not_an_article", source, offset, f"{title}: namespace {namespace}")
    if not isinstance(text, str):
        return Rejected("missing_text", source, offset, title)
    if is_redirect(text):
        return Rejected("redirect", source, offset, title)
    plain = render(text)
    if not plain:
        return Rejected("empty_text", source, offset, title)
    meta = json.dumps({"title": title, "namespace": namespace}, ensure_ascii=False)
    return RawDocument(make_id(source, title), plain, source, meta)
