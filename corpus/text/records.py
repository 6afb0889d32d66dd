"""What a raw record becomes: a `RawDocument`, or a `Rejected` with the reason it is not
one; the options every reader takes; and the checks every reader applies to a value (text,
id, size), so jsonl, txt, Parquet, Arrow and CSV records become documents by one rule."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import IO, Any

from clozeworks.corpus.text.fields import FieldRule, rule_for

# Largest record kept (raw bytes). Far above the length filter's default 10M characters of
# ASCII; a record past it is counted `too_long` without ever being held in memory.
DEFAULT_MAX_RECORD_BYTES = 32 << 20
_SAMPLE_BYTES = 512  # head of a rejected record kept for --rejects


@dataclass(frozen=True)
class RawDocument:
    id: str
    text: str
    source: str
    meta: str = "{}"


@dataclass(frozen=True)
class Rejected:
    """A record that is not a usable document; `sample` is the head of its raw bytes."""

    reason: str
    source: str
    position: int
    detail: str = ""
    sample: str = ""


@dataclass(frozen=True)
class ReadOptions:
    text_field: str = "text"
    id_field: str | None = None
    doc_sep: str = "file"
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    # Text and id fields of the files whose source matches (corpus.text.fields).
    rules: tuple[FieldRule, ...] = ()
    # Fields kept in each document's `meta` (JSON and Parquet inputs).
    meta_fields: tuple[str, ...] = ()
    # The HTML main-text extractor of WARC responses and HTML files (corpus.text.web).
    extractor: str = "resiliparse"

    def for_source(self, source: str) -> ReadOptions:
        """These options with the text and id fields of the first rule `source` matches."""
        rule = rule_for(self.rules, source)
        if rule is None:
            return self
        return replace(
            self,
            text_field=rule.text or self.text_field,
            id_field=rule.id or self.id_field,
            rules=(),
        )


def make_id(source: str, position: int | str) -> str:
    """Stable id from where a record came from: the same on every rerun of the same input."""
    return f"{source}#{position}"


def sample(raw: bytes) -> str:
    return raw[:_SAMPLE_BYTES].decode("utf-8", errors="replace")


def document(
    value: Any, source: str, position: int, record_id: Any, raw: bytes = b"", meta: str = "{}"
) -> RawDocument | Rejected:
    if value is None:
        return Rejected("missing_text", source, position, sample=sample(raw))
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return Rejected("bad_utf8", source, position, sample=sample(raw or value))
    if not isinstance(value, str):
        return Rejected("non_string_text", source, position, type(value).__name__, sample(raw))
    if not value.strip():
        return Rejected("empty_text", source, position, sample=sample(raw))
    if record_id is not None and (
        isinstance(record_id, bool) or not isinstance(record_id, (str, int))
    ):
        return Rejected("bad_id", source, position, type(record_id).__name__, sample(raw))
    doc_id = make_id(source, position) if record_id is None else str(record_id)
    return RawDocument(doc_id, value, source, meta)


def lone_surrogate(doc: RawDocument | Rejected) -> bool:
    """Whether a document's text or id cannot be written as UTF-8."""
    if not isinstance(doc, RawDocument):
        return False
    try:
        doc.text.encode("utf-8")
        doc.id.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def too_long(source: str, position: int, limit: int) -> Rejected:
    return Rejected("too_long", source, position, f"longer than {limit} bytes")


def whole_file(stream: IO[bytes], source: str, options: ReadOptions) -> bytes | Rejected:
    """A file that is one record (position 1): its bytes, or `too_long` past
    `max_record_bytes`, having read no more than one byte beyond it."""
    data = stream.read(options.max_record_bytes + 1)
    if len(data) > options.max_record_bytes:
        return too_long(source, 1, options.max_record_bytes)
    return data


# Field names a "no text field" message lists.


def values(column: Any) -> list[Any]:
    """A column's values; Parquet does not validate its strings, so a column whose bytes are
    not UTF-8 is read as bytes and each bad value is rejected as bad_utf8 on its own."""
    import pyarrow as pa

    try:
        return list(column.to_pylist())
    except UnicodeDecodeError:
        return list(column.cast(pa.binary()).to_pylist())
    except (OverflowError, ValueError) as err:  # a date or time Python cannot hold
        raise pa.ArrowInvalid(f"a {column.type} value out of Python's range ({err})") from None


def exceeds(value: str | bytes, limit: int) -> bool:
    """Whether `value` takes more than `limit` bytes as UTF-8 (encoding only when unsure)."""
    if isinstance(value, bytes) or len(value) > limit:
        return len(value) > limit
    return len(value) * 4 > limit and len(value.encode("utf-8", "surrogatepass")) > limit
