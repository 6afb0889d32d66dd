"""Sentence segmentation for building sentence-aligned training sequences.

The work is done by `sentencex` (Wikimedia's segmenter: Rust, ~300 languages, rules for
abbreviations, initials, decimals, ellipses and quotes). Measured once on the
pragmatic-segmenter golden rules it got 37 of 37 right where our earlier regex splitter got
28 (pysbd 36 but ~500x slower, nupunkt 33, blingfire 34), and it ran about 1.6x faster than
the regex splitter; bench/shard/sentences.py compares it with the peers installed.

sentencex only proposes where sentences start. The sentences themselves are slices of the
original text, cut at positions in it, never the pieces sentencex returns: it can drop the
whitespace between two pieces (a blank line between paragraphs that end without
punctuation: "... GPL-2+" + "\\n\\n" + "Files: ..." comes back as two pieces with nothing
between), so the pieces' edges do not tell whether a boundary lies between words. A cut is
taken only where the original text has whitespace on one side of it, so an identifier such
as `os.path` or `self._rescale` is never cut in the middle, and since the slices cover the
text end to end, the sentences hold every word of it, in order, none glued to another.
Chinese and Japanese put no space between sentences: there a cut is also taken right after
full-width closing punctuation (。！？」), which no identifier holds. Where the pieces tile
the text (most texts), the cuts are read off the pieces' edges instead (`cut_tiled`, the
same sentences without a search per piece).
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable

import sentencex

DEFAULT_LANGUAGE = "en"


def split_sentences(
    text: str, language: str = DEFAULT_LANGUAGE, splitter: str = "sentencex"
) -> list[str]:
    """Sentences of `text` in order, stripped, none empty: `" ".join(...).split()` is
    `text.split()`, but that a word may be cut after full-width punctuation (。).

    `language` is an ISO 639 code; languages sentencex does not know fall back to its
    generic rules. `splitter` "kss" proposes the pieces with kss's MeCab backend instead
    (Korean; the cuts are taken in the text as sentencex's are).
    """
    if splitter == "kss":
        return cut_at(text, piece_starts(text, _kss()(text)))
    pieces = sentencex.segment(language, text)
    if "".join(pieces) == text:  # most texts: the pieces tile it, none found by search
        return cut_tiled(pieces)
    return cut_at(text, piece_starts(text, pieces))


# Korean written without full stops (comments, chat, messenger texts): on such text
# sentencex finds no boundary and kss's MeCab backend 93.8% of them at F1, about 150
# paragraphs a second (bench/README.md, "shard/sentences_ko").
KSS_EXTRA = "pip install 'clozeworks[kss]'"


@functools.cache
def _kss() -> Callable[[str], list[str]]:
    try:
        import kss
    except ImportError:
        raise ImportError(f"--sentence-splitter kss needs kss: {KSS_EXTRA}") from None

    def split(text: str) -> list[str]:
        return list(kss.split_sentences(text, backend="mecab"))

    return split


def cut_tiled(pieces: list[str]) -> list[str]:
    """`cut_at(text, piece_starts(text, pieces))` for pieces that tile `text`: a boundary
    between two pieces is taken where either side of it is whitespace or the first ends
    in full-width closing punctuation."""
    pieces = [p for p in pieces if p]
    out = []
    start = 0
    for i in range(1, len(pieces)):
        last = pieces[i - 1][-1]
        if last.isspace() or pieces[i][0].isspace() or _closes_wide(last):
            sentence = "".join(pieces[start:i]).strip()
            if sentence:
                out.append(sentence)
            start = i
    last_sentence = "".join(pieces[start:]).strip()
    if last_sentence:
        out.append(last_sentence)
    return out


def piece_starts(text: str, pieces: list[str]) -> list[int]:
    """Where each piece starts in `text`. Pieces are substrings of the text in order, with
    possibly something left out between them; a piece not found there is skipped (it
    proposes no boundary)."""
    starts = []
    cursor = 0
    for piece in pieces:
        at = text.find(piece, cursor) if piece else -1
        if at >= 0:
            starts.append(at)
            cursor = at + len(piece)
    return starts


def _closes_wide(ch: str) -> bool:
    """Full-width punctuation that ends a sentence or closes a quote (。！？」』）)."""
    return unicodedata.category(ch) in ("Po", "Pe", "Pf") and unicodedata.east_asian_width(ch) in (
        "W",
        "F",
    )


def cut_at(text: str, starts: list[int]) -> list[str]:
    """`text` cut at those of `starts` that have whitespace on one side or full-width
    closing punctuation before them, each slice stripped, empty ones dropped. Starts are
    taken in the text's order, whatever order they come in (a cut back before the last
    one would give its text twice)."""
    out = []
    previous = 0
    for at in sorted(set(starts)):
        if 0 < at < len(text) and (
            text[at - 1].isspace() or text[at].isspace() or _closes_wide(text[at - 1])
        ):
            sentence = text[previous:at].strip()
            if sentence:
                out.append(sentence)
            previous = at
    last = text[previous:].strip()
    if last:
        out.append(last)
    return out
