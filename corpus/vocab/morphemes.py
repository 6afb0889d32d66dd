"""Morpheme-aware vocabularies (KLUE's recipe; HyperCLOVA's for byte-level BPE): a
vocabulary trained on Korean text cut at its morphemes, whose tokenizer.json then encodes
raw text with no analyzer installed.

KLUE pre-tokenized its corpus with MeCab-ko before training its 32,000 WordPiece pieces;
its released tokenizer is a plain BERT WordPiece that reads raw text. Here the analyzer
marks each morpheme boundary inside a word (an eojeol) of the training sample with
`MARK`, a private-use character; the trainer's pre-tokenizer cuts there, so no piece is
learned across a boundary:

- WordPiece: the mark is kept at the head of the morpheme after it, so the trainer sees
  that morpheme as a word of its own starting with the mark; the pieces it learns that
  start with the mark are the morpheme as a continuation (`##었`), renamed so after
  training. At encoding, BERT's greedy longest match on raw text finds those pieces.
- BPE (byte-level) and Unigram: the mark is removed; a morpheme after a boundary has no
  space before it (no `Ġ`, no `▁`), as inside a word in raw text, so the pieces are what
  raw text's words are cut into.

Analyzers, each an extra: MeCab-ko (`python-mecab-ko` with mecab-ko-dic, the default:
KLUE's analyzer, and 3.1x Kiwi's speed on Debian's Korean manual pages, where the two
share 94-96% of their boundaries; bench/vocab/morphemes.py) and Kiwi (`kiwipiepy`). Both
report where each morpheme lies in the text; a contraction (했 = 하 + 었) is one span, and
no boundary is drawn inside a syllable.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from functools import cache
from typing import Literal, get_args

from clozeworks.schemas.errors import SettingError

Analyzer = Literal["mecab", "kiwi"]
ANALYZERS: tuple[Analyzer, ...] = get_args(Analyzer)
PreTokenize = Literal["words", "morphemes"]
# Between two morphemes of one word in the training sample: a symbol no Korean text uses
# (ALCHEMICAL SYMBOL FOR AQUA VITAE-2, removed from the sample's text before marking) that
# every kind's normalizer keeps and no pre-tokenizer cuts at. Private-use characters
# would do, but BERT's normalizer deletes them.
MARK = "\U0001f70f"
# Analyzer -> (module it needs, the pip extra that installs it).
NEEDS: dict[str, tuple[str, str]] = {
    "mecab": ("mecab", "mecab"),
    "kiwi": ("kiwipiepy", "kiwi"),
}
# Text is analyzed in pieces of at most this many characters at a line break (Kiwi and
# MeCab slow down on very long inputs, and a document may be a whole book).
_PIECE_CHARS = 10_000


def require_analyzer(name: str) -> None:
    """SettingError naming the extra when `name`'s analyzer is not installed."""
    module, extra = NEEDS[name]
    if importlib.util.find_spec(module) is None:
        raise SettingError(
            "analyzer",
            f"--pre-tokenize morphemes with {name} needs it installed: "
            f"pip install 'clozeworks[{extra}]'",
        )


@cache
def _starts(name: str) -> Callable[[str], list[int]]:
    """The analyzer's morpheme start offsets (characters) of a text."""
    require_analyzer(name)
    if name == "kiwi":
        from kiwipiepy import Kiwi

        kiwi = Kiwi()
        return lambda text: [t.start for t in kiwi.tokenize(text)]
    import mecab

    tagger = mecab.MeCab()
    return lambda text: [m.span.start for m in tagger.parse(text)]


def boundaries(text: str, analyzer: str) -> list[int]:
    """Offsets inside words (not after a space, not at the text's start) where a morpheme
    starts, ascending, without repeats."""
    starts = _starts(analyzer)
    found: set[int] = set()
    for offset, piece in _pieces(text):
        for start in starts(piece):
            at = offset + start
            if 0 < at < len(text) and not text[at - 1].isspace() and not text[at].isspace():
                found.add(at)
    return sorted(found)


def mark(text: str, analyzer: str) -> str:
    """`text` with MARK at every morpheme boundary inside a word (and nowhere else)."""
    text = text.replace(MARK, "")
    cuts = boundaries(text, analyzer)
    if not cuts:
        return text
    parts, last = [], 0
    for at in cuts:
        parts.append(text[last:at])
        last = at
    parts.append(text[last:])
    return MARK.join(parts)


def _pieces(text: str) -> list[tuple[int, str]]:
    """(offset, piece) of `text` cut at line breaks into pieces of about _PIECE_CHARS."""
    out, start = [], 0
    while start < len(text):
        end = min(len(text), start + _PIECE_CHARS)
        if end < len(text):
            cut = text.rfind("\n", start, end)
            end = cut + 1 if cut > start else end
        out.append((start, text[start:end]))
        start = end
    return out
