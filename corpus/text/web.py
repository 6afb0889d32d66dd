"""Web pages: Common Crawl WARC (HTML responses, their main text extracted), WET (the text
Common Crawl extracted, as is), and HTML files through the same extractor.

WARC files are read with FastWARC and HTML is extracted with Resiliparse (both from the
Resiliparse project, C++ under Python); `EXTRACTORS` also holds Trafilatura (datatrove's
and FineWeb's extractor) for whoever prefers it. The choice of the default was measured
(bench/warc). Each document keeps its URL, date and content language as fields of its meta;
its id is `{file}#{n}`, n the record's number in the file (1-based, all record types
counted), which stays the same on every read of the same file.

Records that are not documents are counted: `not_html` (a response of another media type),
`http_status` (not 200), `empty_text`, `truncated_record` (the last record of a cut
file, of any type: shorter than its Content-Length says, or its header cut short). A
`.warc.gz` cut inside its gzip data, or
bytes that are not a WARC record, stop the file with one line naming it and the record.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Any, Literal, get_args

from clozeworks.corpus.text.encoding import decode_page
from clozeworks.corpus.text.htmldepth import MAX_DEPTH, too_deep
from clozeworks.corpus.text.records import (
    RawDocument,
    ReadOptions,
    Rejected,
    make_id,
    too_long,
    whole_file,
)
from clozeworks.schemas.errors import BadInputError, SettingError

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


def require_web(extractor: str) -> None:
    """SettingError when the [web] extra (or the chosen extractor) is not installed."""
    import importlib.util

    for module in ("fastwarc", "resiliparse", EXTRACTOR_MODULES[extractor]):
        if importlib.util.find_spec(module) is None:
            raise SettingError(
                "fmt", f"warc, wet and html need {module}: pip install 'clozeworks[web]'"
            )


# --- extractors: HTML bytes (and the charset the server gave) -> (main text, language) -----


def _resiliparse(body: bytes, charset: str | None) -> tuple[str, str | None]:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    html = decode_page(body, charset)
    tree = HTMLTree.parse(html)
    root = tree.document.query_selector("html") if tree.document is not None else None
    language = root.getattr("lang") if root is not None else None
    text = extract_plain_text(
        tree, main_content=True, alt_texts=False, list_bullets=False, links=False
    )
    return text, language or None


def _trafilatura(body: bytes, charset: str | None) -> tuple[str, str | None]:
    import trafilatura

    html = decode_page(body, charset)
    # As datatrove's Trafilatura step calls it (FineWeb's settings).
    text = trafilatura.extract(html, favor_precision=True, include_comments=False, deduplicate=True)
    return text or "", None


Extractor = Callable[[bytes, "str | None"], "tuple[str, str | None]"]
ExtractorName = Literal["resiliparse", "trafilatura"]
EXTRACTORS: dict[str, Extractor] = {"resiliparse": _resiliparse, "trafilatura": _trafilatura}
# The module each needs beside FastWARC (the [web] extra installs both).
EXTRACTOR_MODULES = {"resiliparse": "resiliparse", "trafilatura": "trafilatura"}
assert set(EXTRACTORS) == set(get_args(ExtractorName)) == set(EXTRACTOR_MODULES)
DEFAULT_EXTRACTOR: ExtractorName = "resiliparse"


# --- readers -------------------------------------------------------------------------------


def read_warc(
    stream: IO[bytes], source: str, options: ReadOptions | None = None
) -> Iterator[RawDocument | Rejected]:
    """The documents of a WARC or WET file (decompressed): HTML responses through the
    extractor, conversion records (WET) as they are."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    options = options or ReadOptions()
    extract = EXTRACTORS[options.extractor]
    number, offset = 0, 0
    checked = _UntilBroken(stream)
    records = ArchiveIterator(
        checked,  # type: ignore[arg-type]  # FastWARC reads it with read() and tell()
        record_types=WarcRecordType.any_type,
        parse_http=True,
        stream_detect=False,
        max_content_length=None,
    )
    try:
        for record in records:
            number, offset = number + 1, record.stream_pos
            kind = record.record_type
            if "Content-Length" not in record.headers:
                # FastWARC takes a header cut short for a record of an unknown type.
                yield Rejected("truncated_record", source, number, "the header breaks off")
                continue
            if kind not in (WarcRecordType.response, WarcRecordType.conversion):
                if record.reader.consume() < record.content_length:
                    got = f"{record.headers.get('WARC-Type')}: shorter than its Content-Length"
                    yield Rejected("truncated_record", source, number, got)
                continue
            yield _document(record, kind == WarcRecordType.response, number, source, options,
                            extract)  # fmt: skip
    except (OSError, EOFError) as err:
        checked.error = checked.error or err
    if checked.error is not None:
        where = (
            f"in or after record {number} (which starts at byte {offset} of the WARC data)"
            if number
            else "at its first record"
        )
        problem = f"the WARC breaks off or is damaged {where} ({checked.error})"
        raise BadInputError(f"{source}: {problem}")


class _UntilBroken:
    """A stream that ends where its decompressor fails, keeping the error: FastWARC reads
    ahead in large blocks, so an error raised through it would hide the whole records read
    before it. `read1` returns what one read of the compressed file gives, so what was
    decompressed before the damage is not lost with the call that meets it."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.read1 = getattr(stream, "read1", stream.read)
        self.error: BaseException | None = None

    def read(self, size: int = -1) -> bytes:
        if self.error is not None:
            return b""
        try:
            return bytes(self.read1(size))
        except (OSError, EOFError, zlib.error) as err:
            self.error = err
            return b""

    def tell(self) -> int:
        return self.stream.tell()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False


def _document(
    record: Any, response: bool, number: int, source: str, options: ReadOptions,
    extract: Extractor,
) -> RawDocument | Rejected:  # fmt: skip
    headers = record.headers
    url = headers.get("WARC-Target-URI")
    if record.content_length > options.max_record_bytes:
        record.reader.consume()
        return too_long(source, number, options.max_record_bytes)
    body = record.reader.read()
    if len(body) < record.content_length or "Content-Length" not in headers:
        got = f"{len(body)} of {record.content_length} bytes"
        return Rejected("truncated_record", source, number, f"{url}: {got}")
    meta = {"url": url, "date": headers.get("WARC-Date")}
    language = headers.get("WARC-Identified-Content-Language")
    if response:
        status = record.http_headers.status_code if record.http_headers is not None else 0
        if status != 200:
            return Rejected("http_status", source, number, f"{url}: {status}")
        media = record.http_content_type
        if media and media not in HTML_TYPES:
            return Rejected("not_html", source, number, f"{url}: {media}")
        if too_deep(body):
            return Rejected("too_complex", source, number, f"{url}: nested past {MAX_DEPTH}")
        text, page_language = extract(body, record.http_charset)
        language = language or record.http_headers.get("Content-Language") or page_language
    else:
        text = body.decode("utf-8", errors="replace")
    if not text.strip():
        return Rejected("empty_text", source, number, url or "")
    meta["language"] = language
    return RawDocument(make_id(source, number), text, source, json.dumps(meta, ensure_ascii=False))


def read_html(
    stream: IO[bytes], source: str, options: ReadOptions | None = None
) -> Iterator[RawDocument | Rejected]:
    """An HTML file is one document (position 1): its main text, its `lang` as language."""
    options = options or ReadOptions()
    data = whole_file(stream, source, options)
    if isinstance(data, Rejected):
        yield data
        return
    if too_deep(data):
        yield Rejected("too_complex", source, 1, f"nested past {MAX_DEPTH}")
        return
    text, language = EXTRACTORS[options.extractor](data, None)
    if not text.strip():
        yield Rejected("empty_text", source, 1)
        return
    meta = json.dumps({"language": language}, ensure_ascii=False)
    yield RawDocument(make_id(source, 1), text, source, meta)
