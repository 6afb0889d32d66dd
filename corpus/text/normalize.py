"""Text normalization applied to every document before filtering and deduplication."""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Literal, get_args

from clozeworks.schemas.errors import SettingError

NormalForm = Literal["NFC", "NFKC"]
NORMAL_FORMS: tuple[NormalForm, ...] = get_args(NormalForm)

# C0/C1 control characters except tab and newline, plus the byte-order mark; \r is handled
# as a line break before this runs.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ufeff]")
# The same characters in ASCII text, as bytes: `bytes.translate` deletes them about 6x as
# fast as the regex finds none (realistic documents are mostly ASCII).
_ASCII_CONTROL = bytes([*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F])
_BLANK_RUNS = re.compile(r"\n{3,}")


def normalize_text(text: str, form: str = "NFC", fix_mojibake: bool = False) -> str:
    """Unicode `form`, control characters removed, whitespace runs collapsed to one space.

    Line structure is kept: line breaks stay, lines are stripped, and more than one empty
    line in a row becomes one (paragraph breaks survive). Idempotent. `fix_mojibake` first
    repairs text decoded with the wrong codec ("donâ€™t" -> "don't") with ftfy.
    """
    if form not in NORMAL_FORMS:
        raise ValueError(f"unknown normal form {form!r}; expected one of {', '.join(NORMAL_FORMS)}")
    if fix_mojibake:
        text = _ftfy().fix_text(text, normalization=form)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.isascii():  # already in every normal form
        raw = text.encode("ascii")
        kept = raw.translate(None, _ASCII_CONTROL)
        if len(kept) != len(raw):
            text = kept.decode("ascii")
    else:
        text = _CONTROL.sub("", unicodedata.normalize(form, text))
    # Whitespace runs to one space and lines stripped, by str.split (the characters `\s`
    # matches): a regex substitution visits every space, and this whole function took 1.8x
    # as long with one (bench/wiki's articles).
    text = "\n".join(" ".join(line.split()) for line in text.split("\n"))
    if "\n\n\n" in text:  # a substring test is ~7x faster than the regex finding nothing
        text = _BLANK_RUNS.sub("\n\n", text)
    return text.strip()


def _ftfy() -> Any:
    try:
        import ftfy
    except ImportError:
        raise SettingError("fix_mojibake", "needs ftfy: pip install 'clozeworks[ftfy]'") from None
    return ftfy


def check_mojibake_support() -> None:
    """UsageError now, before a pipeline starts, if ftfy is not installed."""
    _ftfy()
