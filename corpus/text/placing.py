"""What an input file is: its record format, by a rule the user gave for its source, by
its name, or by its first bytes; or why no reader can take it.

Names come first because they are cheap (a crawl of thousands of files is not opened on
the launching machine) and are how corpora are published: Wikimedia's dumps
(`enwiki-latest-pages-articles1.xml-p10p30302.bz2`, `...-multistream.xml.bz2`), Common
Crawl's `.warc.gz` and `.warc.wet.gz`, `.jsonl`, `.parquet`. A name that says nothing a
reader knows is placed by the file's first bytes (decompressed as its name says): a WARC
header, a `<mediawiki>` root, Parquet's and Arrow's magic, an HTML document, a JSON object
a line, else text. A file that is none of these (compressed data under a name that does not
say so, binary data, markup no reader knows) is not read as text: it is skipped with the
reason `unknown_format`, named, and counted.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO

from clozeworks.corpus.text.readers import FORMATS, decompressing, strip_compression

# Why a file no reader takes is left out (`.stats.json` `skipped_files`).
UNKNOWN_FORMAT = "unknown_format"
# How much of a file its placing reads: a WARC header, an XML prolog and a dump's
# `<mediawiki ...>` with its namespaces' URIs, or an HTML page's doctype.
HEAD_BYTES = 4096

# By name, the compression suffix stripped and case ignored: the first that matches.
_BY_NAME: tuple[tuple[str, str], ...] = (
    # 모두의 말뭉치: each file named by its collection's code and number (NWRW1800000022).
    (r"(^|/)[a-z]{4}\d{7,}\.json$", "modu"),
    # NamuWiki's dumps: namuwiki_20210301.json, namuwiki200302.json.
    (r"(^|/)namuwiki[^/]*\.json$", "namuwiki"),
    (r"\.(jsonl|json|ndjson)$", "jsonl"),
    (r"\.parquet$", "parquet"),
    (r"\.arrow$", "arrow"),
    (r"\.csv$", "csv"),
    (r"\.tsv$", "tsv"),
    # Wikimedia's dumps: pages-articles[-multistream][N].xml, split dumps with their page
    # range after the extension (-p10p30302), meta-current and meta-history alike.
    (r"(^|/)[^/]*pages-[^/]*\.xml(-p\d+p\d+)?$", "mediawiki"),
    (r"\.(warc\.)?wet$", "wet"),
    (r"\.warc$", "warc"),
    (r"\.(html|htm|xhtml)$", "html"),
    (r"\.(txt|text)$", "txt"),
)
_NAME_RULES = tuple((re.compile(pattern), fmt) for pattern, fmt in _BY_NAME)
# The dumps' index files hold `offset:page id:title` lines: no text to learn from.
_DUMP_INDEX = re.compile(r"-multistream-index\d*\.txt(-p\d+p\d+)?$")

# Compressed data under a name without the suffix that says how to decompress it.
_COMPRESSED_MAGIC = (b"\x1f\x8b", b"\x28\xb5\x2f\xfd", b"BZh", b"\xfd7zXZ\x00")
_WET_HEADER = re.compile(rb"WARC-Type: conversion|WARC-Filename: [^\r\n]*\.wet", re.IGNORECASE)
_HTML_START = re.compile(rb"<!doctype html|<html[\s>]", re.IGNORECASE)


@dataclass(frozen=True)
class FormatRule:
    """For the files whose source (the path from its input's name, as in ids: `raw/web/a.gz`)
    matches `pattern` (fnmatch; `*` crosses `/`), the record format."""

    pattern: str
    fmt: str

    def matches(self, source: str) -> bool:
        return fnmatch.fnmatchcase(source, self.pattern)

    def to_text(self) -> str:
        return self.fmt if self.pattern == "*" else f"{self.pattern}:{self.fmt}"


def parse_format_rules(text: str) -> tuple[FormatRule, ...]:
    """`FORMAT` (every file) or `PATTERN:FORMAT` rules separated by `;`. ValueError naming
    the rule whose format is not one the readers know."""
    rules = []
    for item in (part.strip() for part in text.split(";")):
        if not item:
            continue
        pattern, _, fmt = item.rpartition(":")
        fmt = fmt.strip()
        if fmt not in FORMATS:
            raise ValueError(
                f"{item!r}: {fmt!r} is not a format; expected one of {', '.join(FORMATS)}"
            )
        rules.append(FormatRule(pattern.strip() or "*", fmt))
    return tuple(rules)


def format_by_name(path: str) -> str | None:
    """The record format `path`'s name says, None when it says none a reader knows."""
    name = strip_compression(path.lower().replace("\\", "/"))
    return next((fmt for rule, fmt in _NAME_RULES if rule.search(name)), None)


def format_by_content(head: bytes) -> str | None:
    """The record format a file's first bytes (decompressed) show, None when they show
    none a reader takes."""
    if head.startswith(_COMPRESSED_MAGIC):
        return None
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith((b"ARROW1", b"\xff\xff\xff\xff")):
        return "arrow"
    if head.startswith(b"WARC/"):
        return "wet" if _WET_HEADER.search(head) else "warc"
    if b"\x00" in head:
        return None
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if text.startswith(b"<"):
        if re.match(rb"(<\?xml[^>]*>\s*)?<mediawiki[\s>]", text):
            return "mediawiki"
        return "html" if _HTML_START.match(text) else None
    if _json_object_line(text):
        return "jsonl"
    return "txt" if _utf8_prefix(head) else None


def _json_object_line(text: bytes) -> bool:
    line, newline, _ = text.partition(b"\n")
    if not newline or not line.startswith(b"{"):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _utf8_prefix(head: bytes) -> bool:
    """True if `head` is UTF-8, but for a character its cut may have split."""
    for cut in range(4):
        try:
            head[: len(head) - cut].decode("utf-8")
            return True
        except UnicodeDecodeError:
            continue
    return False


def rule_format(rules: Sequence[FormatRule], source: str) -> str | None:
    """The format of the first rule that matches `source`, None when none does."""
    return next((r.fmt for r in rules if r.matches(source)), None)


def place(
    path: str, source: str, rules: Sequence[FormatRule], opener: Callable[[str], IO[bytes]]
) -> str | None:
    """The format `path` is read as (a rule for its `source`, its name, or its first bytes
    read through `opener`), or None when no reader can take it."""
    fmt = rule_format(rules, source)
    if fmt is not None:
        return fmt
    if _DUMP_INDEX.search(strip_compression(path.lower())):
        return None
    fmt = format_by_name(path)
    if fmt is not None:
        return fmt
    with opener(path) as raw, decompressing(raw, path) as stream:
        return format_by_content(stream.read(HEAD_BYTES))
