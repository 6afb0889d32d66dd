"""Hangul as sub-characters (KR-BERT's sub-character vocabulary): a tokenizer whose
normalizer decomposes every precomposed syllable (가-힣) into its conjoining jamo
(U+1100-U+11FF) and whose decoder composes them back, while every other character passes
as the kind's own normalizer leaves it.

`tokenizers` has no normalizer that decomposes Hangul alone: NFD and NFKD also take accents
off Latin letters, and NFC after them would compose the jamo again. Its `Precompiled`
normalizer (SentencePiece's character map, as ALBERT's and T5's tokenizer.json carry it)
maps characters by a table instead, and `jamo.charsmap` beside this module is that table for
the 11,172 syllables and nothing else, built by SentencePiece from the rules Unicode gives
(`build_charsmap`; a test builds it again and compares the bytes). It travels inside the
tokenizer.json, so the tokenizer needs neither this package nor SentencePiece to run.

`Precompiled` looks a grapheme of fewer than six bytes up as a whole and keeps only what
its first character maps to: a syllable followed by one combining mark of two bytes (가́)
would lose the mark. A `SENTINEL` put between them first, and taken out after, keeps it. A
SENTINEL the text itself holds there (U+FFFF is a noncharacter, never text) goes too.

The decoder composes with one `Replace` per syllable, three jamo before two (각 before
가), after `Fuse` has joined the pieces: on jamo, what Unicode's NFC composes, and only
that (pieces hold no syllables to compose further: the normalizer took them apart).
"""

from __future__ import annotations

import functools
import unicodedata
from pathlib import Path

from tokenizers import Regex, decoders, normalizers

CHARSMAP_FILE = Path(__file__).with_name("jamo.charsmap")
FIRST_SYLLABLE, LAST_SYLLABLE = 0xAC00, 0xD7A3
SYLLABLES = "\uac00-\ud7a3"
# The medial vowels and final consonants a decomposed syllable ends with.
SYLLABLE_ENDS = "\u1161-\u1175\u11a8-\u11c2"
SENTINEL = "\uffff"


def syllables() -> list[str]:
    return [chr(c) for c in range(FIRST_SYLLABLE, LAST_SYLLABLE + 1)]


@functools.cache
def charsmap() -> bytes:
    return CHARSMAP_FILE.read_bytes()


def decomposing() -> list[normalizers.Normalizer]:
    """The normalizer steps that decompose each syllable into jamo, put after the kind's."""
    return [
        normalizers.Replace(Regex(rf"(?<=[{SYLLABLES}])(?=\p{{M}})"), SENTINEL),
        normalizers.Precompiled(charsmap()),
        normalizers.Replace(Regex(rf"(?<=[{SYLLABLE_ENDS}]){SENTINEL}(?=\p{{M}})"), ""),
    ]


def composing() -> list[decoders.Decoder]:
    """The decoder steps that compose jamo into syllables, put after the kind's."""
    pairs = sorted(((unicodedata.normalize("NFD", s), s) for s in syllables()), key=_longest_first)
    return [decoders.Fuse(), *(decoders.Replace(jamo, s) for jamo, s in pairs)]


def _longest_first(pair: tuple[str, str]) -> tuple[int, str]:
    return -len(pair[0]), pair[1]


def build_charsmap() -> bytes:
    """The character map SentencePiece compiles from Unicode's decomposition of every
    syllable (needs `sentencepiece`, a development dependency)."""
    import sentencepiece

    rules = [(s, unicodedata.normalize("NFD", s)) for s in syllables()]
    sentencepiece.set_min_log_level(2)
    spec = sentencepiece.SentencePieceNormalizer(norm_map=rules).serialized_normalizer_spec()
    return _bytes_field(spec, 2)  # NormalizerSpec.precompiled_charsmap


def _bytes_field(message: bytes, number: int) -> bytes:
    """The first length-delimited field `number` of a serialized protocol buffer."""
    at = 0
    while at < len(message):
        key, at = _varint(message, at)
        if key & 7 == 0:
            _, at = _varint(message, at)
        elif key & 7 == 2:
            size, at = _varint(message, at)
            if key >> 3 == number:
                return message[at : at + size]
            at += size
        else:
            raise ValueError(f"unexpected wire type {key & 7} in a NormalizerSpec")
    raise ValueError(f"no field {number} in the NormalizerSpec")


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


if __name__ == "__main__":  # regenerate the table: python -m clozeworks.corpus.vocab.jamo
    CHARSMAP_FILE.write_bytes(build_charsmap())
