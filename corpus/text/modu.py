"""모두의 말뭉치 (the National Institute of Korean Language's Modu corpus) JSON files, one
document each.

Every collection (newspaper, written, spoken, messenger, web) is a JSON object with the
corpus's `id` and `metadata` and a `document` list; a document has its `id` (NWRW1800000022.417),
its `metadata` (title, author, publisher, date, topic; a conversation's speakers and
setting) and its text as `paragraph[].form` (written kinds) or `utterance[].form` (spoken
and messenger). A document's text is its paragraphs or utterances, one a line, as
CC-100's; its id is `{source}#{document id}` and its meta the document id with its
metadata. Files run to hundreds of megabytes: they are streamed (ijson, the `[korean]`
extra), one document held at a time.

A file that is not such an object, breaks off or holds broken JSON is one line naming the
file and the last document read before the damage (BadInputError).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from typing import IO, Any

from clozeworks.corpus.text.records import (
    RawDocument,
    ReadOptions,
    Rejected,
    exceeds,
    make_id,
    too_long,
)
from clozeworks.schemas.errors import BadInputError, SettingError

# The lists a document's text is in, by collection: written kinds, then spoken ones.
TEXT_LISTS = ("paragraph", "utterance")
_DOCUMENTS = "document"
# A Modu file nests six or seven deep (a conversation's speakers in its metadata).
MAX_DEPTH = 64
_OPEN = ("start_map", "start_array")
_NOT_MODU = "not a 모두의 말뭉치 (Modu) JSON file: no top-level 'document' list"
_CLOSE = ("end_map", "end_array")


def require_ijson() -> None:
    """SettingError when ijson is not installed (the [korean] extra)."""
    if importlib.util.find_spec("ijson") is None:
        raise SettingError("fmt", "modu and namuwiki need ijson: pip install 'clozeworks[korean]'")


class _TooDeep(ValueError):
    pass


def _watched(events: Iterator[tuple[str, str, Any]], seen: dict[str, bool]) -> Iterator[Any]:
    """The parser's events, noting whether the top level was an object with a `document`
    list (what a Modu file is); BadInputError for nesting no Modu file has (a hostile one
    would exhaust memory building the objects)."""
    depth = 0
    for prefix, event, value in events:
        if event in _OPEN:
            depth += 1
            if depth > MAX_DEPTH:
                raise _TooDeep(f"nested more than {MAX_DEPTH} deep")
            if prefix == _DOCUMENTS and event == "start_array":
                seen[_DOCUMENTS] = True
        elif event in _CLOSE:
            depth -= 1
        yield prefix, event, value


def _text(doc: dict[str, Any]) -> tuple[str | None, str]:
    """(the document's text, or None; which list it was in, or what is wrong)."""
    for name in TEXT_LISTS:
        items = doc.get(name)
        if isinstance(items, list):
            forms = [i.get("form") for i in items if isinstance(i, dict)]
            if any(not isinstance(f, str) for f in forms if f is not None):
                return None, f"a {name} form that is not a string"
            return "\n".join(f.strip() for f in forms if f and f.strip()), name
    return None, f"no {' or '.join(TEXT_LISTS)} list"


def read_modu(stream: IO[bytes], source: str, options: ReadOptions) -> Iterator[Any]:
    """Documents of one Modu JSON file, in order (`Rejected` for one without text)."""
    import ijson

    seen = {_DOCUMENTS: False}
    position, where = 0, "before its first document"
    events = _watched(ijson.parse(stream, use_float=True), seen)
    try:
        for doc in ijson.items(events, f"{_DOCUMENTS}.item"):
            position += 1
            yield _document(doc, source, position, options)
            name = f" ({doc.get('id')})" if isinstance(doc, dict) else ""
            where = f"after document {position}{name}"
    except (ijson.JSONError, UnicodeDecodeError, _TooDeep) as err:
        problem = str(err).splitlines()[0] if str(err) else type(err).__name__
        if not seen[_DOCUMENTS]:
            raise BadInputError(f"{source}: {_NOT_MODU} ({problem})") from None
        raise BadInputError(f"{source}: broken or cut-off JSON {where} ({problem})") from None
    if not seen[_DOCUMENTS]:
        raise BadInputError(f"{source}: {_NOT_MODU}")


def _document(doc: Any, source: str, position: int, options: ReadOptions) -> Any:
    if not isinstance(doc, dict):
        return Rejected("not_a_document", source, position, type(doc).__name__)
    doc_id = doc.get("id")
    if not isinstance(doc_id, str) or not doc_id:
        doc_id = str(position)
    text, said = _text(doc)
    if text is None:
        reason = "non_string_text" if "string" in said else "missing_text"
        return Rejected(reason, source, position, f"{doc_id}: {said}")
    if not text:
        return Rejected("empty_text", source, position, doc_id)
    if exceeds(text, options.max_record_bytes):
        return too_long(source, position, options.max_record_bytes)
    metadata = doc.get("metadata")
    meta = {"document_id": doc_id, **(metadata if isinstance(metadata, dict) else {})}
    return RawDocument(make_id(source, doc_id), text, source, json.dumps(meta, ensure_ascii=False))
