"""The fastest encoder that gives `tokenizers`' ids for a tokenizer.json (issue 39).

`tokenizers` trains every vocabulary and stays the reference. Faster Rust encoders read
the same tokenizer.json, but each implements only some normalizers and pre-tokenizers, and
some differ where they do: bench/tokenize/compare.py measured, on realistic documents in
six scripts and edge cases, that tokie gives every id for cased WordPiece and byte-level
BPE (9-13x `tokenizers` per core), kitoken for this project's uncased WordPiece (1.75x),
and neither for Unigram. So the candidates are tried fastest first, and one is taken only
if it loads the tokenizer.json and gives every id `tokenizers` gives on `PROBES` (text in
a dozen scripts, emoji sequences, control characters, a long word, special tokens written
in the text); otherwise `tokenizers` encodes (said once per process on stderr where a
candidate could not read the file at all). kitoken
differs only there for uncased WordPiece: it reads `[CLS]` in a text as five characters,
`tokenizers` as the special token. tokie is the `[fast]` extra; kitoken is tried when
installed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from tokenizers import Tokenizer

ID_DTYPE = np.int32
# texts -> (every text's ids concatenated, each text's length)
FlatEncode = Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]

PROBES = (
    "Hello world. This is a test!  Another one? Yes.",
    "Mr. Smith paid $3.50 for 2.5 kg, i.e. a lot.\nThen he left... Did he?",
    "def f(x):\n    return os.path.join(x, '/etc/apt/sources.list')  # apt-get update",
    "«Bonjour», dit-il. Ça va ? Très bien ! Ἀρχή. Ünïcödé ÀÉÎ ÅÆØ ß ĳ ﬁ Ⅻ ①",
    "언어 모델은 많은 문서를 읽고 다음에 올 낱말을 예측하도록 훈련됩니다. 훈련 ᄀᄂ",
    "日本語の文書には単語の間に空白がありません。ガギグゲゴ ﾊﾟﾋﾟ が か",
    "我们喜欢自然语言处理，也喜欢机器学习。繁體中文測試。",
    "Русский текст с ёлкой и Й. Українська мова: ґ, ї, є.",
    "تتعلم النماذج اللغوية من النصوص. עברית עם ניקוד: שָׁלוֹם. हिन्दी पाठ। ภาษาไทย ไม่มีช่องว่าง",
    "Deploy 🚀 done ✅ 👩‍💻 🏳️‍🌈 🇰🇷🇯🇵 👍🏽 ❤️ ©®™",
    "tab\there\x00nul\x07bell\x1b[31mred\r\nCRLF\x0bVT\x0cFF\u200bZWSP\ufeffBOM\u00a0NBSP\u2028LS",
    "supercalifragilisticexpialidocious" * 20 + " x" * 3 + "   trailing spaces   ",
    "  leading space. Tabs\tand\nnew lines.  [CLS] [SEP] <s> </s> <mask> ▁ Ġ ##ing",
)
_TOLD: set[str] = set()


def flat_ids(id_lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(every list's ids concatenated as int32, each list's length)."""
    lengths = np.fromiter(map(len, id_lists), dtype=np.int64, count=len(id_lists))
    flat = np.fromiter(
        (i for ids in id_lists for i in ids), dtype=ID_DTYPE, count=int(lengths.sum())
    )
    return flat, lengths


def tokenizers_encoder(tok: Tokenizer) -> FlatEncode:
    """`tokenizers`' own `encode_batch_fast`, no special tokens: the reference."""

    def encode(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        encodings = tok.encode_batch_fast(list(texts), add_special_tokens=False)
        return flat_ids([e.ids for e in encodings])

    return encode


def _tokie(spec: str) -> FlatEncode:
    import tokie

    # tokie reads a tokenizer.json from a file only.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tokenizer.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(spec)
        tok: Any = tokie.Tokenizer.from_json(path)

    def encode(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        ids, lengths = tok.encode_batch_flat(list(texts), add_special_tokens=False)
        return ids.astype(ID_DTYPE), lengths.astype(np.int64)

    return encode


def _kitoken(spec: str) -> FlatEncode:
    import kitoken

    tok = kitoken.Kitoken.from_tokenizers(spec.encode("utf-8"))

    def encode(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return flat_ids(tok.encode_all(list(texts)))

    return encode


# Fastest first (bench/tokenize/compare.py): module -> loader from tokenizer.json text.
CANDIDATES: dict[str, Callable[[str], FlatEncode]] = {"tokie": _tokie, "kitoken": _kitoken}


# Set to "tokenizers" to encode with `tokenizers` alone (to compare, or to rule a
# candidate out).
ENCODER_VARIABLE = "CLOZEWORKS_ENCODER"


_CHOSEN: dict[str, FlatEncode] = {}


def encoder_for(tok: Tokenizer) -> FlatEncode:
    """`fast_encoder(tok)`'s encode, chosen once per tokenizer.json and process (callers
    that get the same tokenizer batch after batch), without the file's truncation or
    padding."""
    spec = tok.to_str()
    key = hashlib.sha256(spec.encode("utf-8")).hexdigest() + os.environ.get(ENCODER_VARIABLE, "")
    if key not in _CHOSEN:
        if tok.truncation is not None or tok.padding is not None:
            tok = Tokenizer.from_str(spec)
            tok.no_truncation()
            tok.no_padding()
        _CHOSEN[key] = fast_encoder(tok)[1]
    return _CHOSEN[key]


def alphabet_probes(tok: Tokenizer) -> list[str]:
    """Every character the vocabulary has a piece for, and every character that
    decomposes to one of them plus marks (が to か, é to e), in words of one character:
    where two encoders normalize differently (strip a mark or keep it), a vocabulary
    that knows the bare character shows it. Empty for byte-level vocabularies."""
    singles = set()
    for token in tok.get_vocab():
        bare = token.removeprefix("##").removeprefix("\u2581")
        if len(bare) == 1:
            singles.add(bare)
    composed = []
    for code in range(0xA0, 0x30000):
        char = chr(code)
        parts = unicodedata.normalize("NFD", char)
        if len(parts) > 1 and parts[0] in singles:
            composed.append(char)
    chars = sorted(singles) + composed
    return [" ".join(chars[i : i + 500]) for i in range(0, len(chars), 500)]


def fast_encoder(tok: Tokenizer) -> tuple[str, FlatEncode]:
    """(name, encode) of the fastest candidate that gives `tok`'s ids on every probe and
    alphabet probe, or ("tokenizers", its own encode). `tok` must neither truncate nor pad."""
    reference = tokenizers_encoder(tok)
    if os.environ.get(ENCODER_VARIABLE) == "tokenizers":
        return "tokenizers", reference
    spec = tok.to_str()
    probes = [*PROBES, *alphabet_probes(tok)]
    want_ids, want_lengths = reference(probes)
    unreadable = []
    for name, load in CANDIDATES.items():
        if importlib.util.find_spec(name) is None:
            continue
        try:
            encode = load(spec)
        except Exception as err:  # a candidate that cannot read this tokenizer.json
            unreadable.append(f"{name} ({str(err).splitlines()[0][:80]})")
            continue
        try:
            ids, lengths = encode(probes)
        except Exception:  # or fails on the probes: not exact, so not used
            continue
        if np.array_equal(ids, want_ids) and np.array_equal(lengths, want_lengths):
            return name, encode
    # Differing ids is what the probes are for and needs no word; a candidate that cannot
    # read the file is said, once per tokenizer and process.
    digest = hashlib.sha256(spec.encode("utf-8")).hexdigest()
    if unreadable and digest not in _TOLD:
        _TOLD.add(digest)
        print(
            f"tokenizer {digest[:12]}: {'; '.join(unreadable)} cannot read it; "
            "encoding with tokenizers",
            file=sys.stderr,
        )
    return "tokenizers", reference
