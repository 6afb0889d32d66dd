"""Word starts of text written without spaces, for whole-word, span and n-gram masking.

A vocabulary marks words by its own convention (WordPiece `##`, BPE `Ġ`, Unigram `▁`).
In Chinese and Japanese that convention finds no words: BERT's WordPiece makes every Han
character a word of its own and a run of kana one long word; byte-level BPE and Unigram
make a whole sentence one word, since there is no space in it. Chinese-BERT-wwm (Cui et
al. 2021) masks the words of a segmenter instead, found again from the tokens alone
(its `run_chinese_ref.py`). So does this: the text a row of ids stands for is rebuilt
from each piece's bytes, the language's segmenter (`corpus/text/filters/segmenters.py`,
named by `corpus/text/filters/languages.py`) cuts it into words, and a piece starts a
word where a segmenter word starts at its first byte. The shards are unchanged, and the
static writer and the trainer's dynamic masking get the same words from the same ids.
A word boundary inside a piece joins the two words (a piece is never split), and a piece
that begins inside a character (byte-level BPE) never starts a word.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from clozeworks.corpus.text.filters.languages import segmenter_name
from clozeworks.corpus.text.filters.segmenters import available, segmenter
from clozeworks.schemas.errors import UsageError
from clozeworks.schemas.special_tokens import SpecialTokens

# Scripts written without spaces: a WordPiece word start in them had no space before it.
_UNSPACED = (
    (0x3000, 0x303F),  # CJK symbols and punctuation
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK Unified Ideographs Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0xFF00, 0xFFEF),  # Halfwidth and fullwidth forms
    (0x20000, 0x3FFFF),  # CJK Unified Ideographs Extensions B and after
)


def _unspaced(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _UNSPACED)


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, inverted: the character a byte is written as -> the byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


@dataclass(frozen=True)
class SegmentedWords:
    """Per-position word starts of rows of ids, by a segmenter (see the module docstring)."""

    segmenter: str
    pieces: tuple[bytes, ...]  # [V] the text of each id, without its word mark
    spaced: np.ndarray  # [V] bool: the piece begins a space-separated word
    lengths: np.ndarray  # [V] int64, len(pieces[i])

    @classmethod
    def build(
        cls, tokens: Sequence[str | None], special: SpecialTokens, segmenter_name: str
    ) -> SegmentedWords:
        """From every id's token string (None for an id the vocabulary lacks) and the
        vocabulary's word marks."""
        decoder = _byte_decoder() if special.word_start_prefix == "\u0120" else None
        pieces: list[bytes] = []
        spaced = np.zeros(len(tokens), dtype=bool)
        for i, token in enumerate(tokens):
            text = token or ""
            if special.continuation_prefix is not None:
                if text.startswith(special.continuation_prefix):
                    text = text[len(special.continuation_prefix) :]
                else:
                    spaced[i] = not text or not _unspaced(text[0])
            elif special.word_start_prefix is not None and text.startswith(
                special.word_start_prefix
            ):
                text = text[len(special.word_start_prefix) :]
                spaced[i] = True
            if decoder is not None and all(c in decoder for c in text):
                pieces.append(bytes(decoder[c] for c in text))
            else:
                pieces.append(text.encode("utf-8"))
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        return cls(segmenter_name, tuple(pieces), spaced, lengths)

    def starts(self, ids: np.ndarray, maskable: np.ndarray) -> np.ndarray:
        """[B, L] bool: the maskable positions whose piece starts a segmenter word.
        ids [B, L] int; maskable [B, L] bool (real, non-special positions)."""
        segment = segmenter(self.segmenter)
        out = np.zeros(maskable.shape, dtype=bool)
        for b in range(ids.shape[0]):
            row, real = ids[b], maskable[b]
            # A special token or padding separates like a line break, a spaced piece
            # gets its space back.
            before = np.where(real, self.spaced[row], True).astype(np.int64)  # [L]
            body = np.where(real, self.lengths[row], 0)  # [L]
            first_byte = np.cumsum(before + body) - body  # [L] where each piece begins
            spaced = self.spaced[row].tolist()
            data = b"".join(
                (b" " + self.pieces[i] if s else self.pieces[i]) if r else b"\n"
                for i, s, r in zip(row.tolist(), spaced, real.tolist(), strict=True)
            )
            text = data.decode("utf-8", "surrogateescape")
            char_start = _char_starts(text)
            word_starts = []
            at = 0
            for word in segment(text):
                found = text.find(word, at)
                if found < 0:
                    continue  # the segmenter changed the text; the word finds no piece
                word_starts.append(char_start[found])
                at = found + len(word)
            # An empty piece (Unigram's lone `▁`) begins where the next one does: the
            # first of them starts the word.
            first = np.ones(len(row), dtype=bool)
            first[1:] = first_byte[1:] != first_byte[:-1]
            found_start = np.isin(first_byte, np.asarray(word_starts, dtype=np.int64))
            out[b] = real & first & found_start
        return out


def _char_starts(text: str) -> np.ndarray:
    """[len(text)] the byte offset of each character in text's UTF-8 (surrogate escapes,
    bytes that were no character, take one byte)."""
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    width = 1 + (codes >= 0x80) + (codes >= 0x800) + (codes >= 0x10000)
    width[(codes >= 0xDC80) & (codes <= 0xDCFF)] = 1
    return np.cumsum(width) - width


def segmented_words(
    language: str | None, tokens: Sequence[str | None], special: SpecialTokens
) -> SegmentedWords | None:
    """The segmenter's words for `language`'s text, for a vocabulary of `tokens` (every
    id's token string); None where the language separates words with spaces, so the
    vocabulary's own word starts hold. Raises if its segmenter is not installed: masking
    by the vocabulary's words instead would mask single Han characters or whole sentences."""
    name = segmenter_name(language)
    if name is None:
        return None
    if not available(name):
        raise UsageError(
            f"whole-word, span and n-gram masking of {language} text needs its words from "
            f"{name}: pip install 'clozeworks[cjk]'"
        )
    return SegmentedWords.build(tokens, special, name)
