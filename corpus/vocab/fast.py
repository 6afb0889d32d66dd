"""The fastest encoder that gives `tokenizers`' ids for a tokenizer.json (issue 39).

`tokenizers` trains every vocabulary and stays the reference. Faster Rust encoders read
the same tokenizer.json, but each implements only some normalizers, and some differ where
they do: bench/tokenize/compare.py measured, on realistic documents in six scripts and
edge cases, that tokie's models agree with `tokenizers`' for every kind, while its
normalizers and pre-tokenizers differ here and there (it strips the overlay of `≠`, keeps
DEL, does not lowercase after a Replace, splits a whitespace run with a vertical tab).

So each candidate is tried two ways, fastest first:
- whole: it reads the tokenizer.json as it is;
- split (`SplitEncoder`): texts without control characters (`has_no_controls`) go to it
  reading the file with its normalizer less the steps that are the identity on ASCII
  (Unicode's normalization forms, accent stripping); where there were such steps, only
  texts of printable ASCII (`is_plain`). There, texts made of ASCII and of characters
  on which the candidate reading the whole file agrees with `tokenizers`, one by one
  (`agreeing_characters`: the vocabulary's alphabet, Latin-1 and Latin Extended, general
  punctuation and currency signs), go to it whole (`CharacterRoute`). Every other text
  goes through `tokenizers`' own normalizer first, in this process, and then to the
  candidate reading the file without a normalizer (`Prenormalized`), or to `tokenizers`
  where that does not give its ids.
A way is taken only if it gives every id `tokenizers` gives on `PROBES` (text in a dozen
scripts, emoji sequences, control characters, a long word, special tokens written in the
text), on every control, format and space character, and on every character of the
vocabulary's alphabet; otherwise `tokenizers` encodes (said once per process on stderr
where a candidate could not read the file at all). Probes alone proved too little (a tab
before `'s`, long runs, unassigned code points differed on real text), so the way taken
is guarded (corpus/vocab/proven.py): it encodes only texts inside the domain proven for it
when it is chosen, and `tokenizers` encodes the others. tokie is the `[fast]` extra;
kitoken is tried when installed.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import itertools
import json
import os
import re
import sys
import tempfile
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from clozeworks.corpus.vocab.proven import (
    Counted,
    FlatEncode,
    Guarded,
    interleave,
    proven_characters,
    run_forms,
    run_limit,
    unknown_characters,
)

ID_DTYPE = np.int32

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


# Normalizers that leave ASCII text as it is: it has no decompositions and no marks.
ASCII_IDENTITY = frozenset({"NFC", "NFD", "NFKC", "NFKD", "StripAccents"})


def _without(normalizer: dict[str, Any] | None, drop: frozenset[str]) -> dict[str, Any] | None:
    """`normalizer` (a tokenizer.json node) less the steps whose type is in `drop`."""
    if normalizer is None or normalizer["type"] in drop:
        return None
    if normalizer["type"] != "Sequence":
        return normalizer
    kept = [n for n in (_without(n, drop) for n in normalizer["normalizers"]) if n is not None]
    if len(kept) <= 1:
        return kept[0] if kept else None
    return {**normalizer, "normalizers": kept}


def _with_normalizer(spec: str, normalizer: dict[str, Any] | None) -> str:
    data = json.loads(spec)
    data["normalizer"] = normalizer
    return json.dumps(data, ensure_ascii=False)


class Prenormalized:
    """`tokenizers`' normalizer in this process, then `encode`: a candidate that reads
    the tokenizer.json without its normalizer. Special tokens are cut out before
    normalizing, as `tokenizers` matches them in the raw text; a text whose normalized
    words spell a special token (`<S>` lowercased to `<s>`, fullwidth `＜ｓ＞` under NFKC),
    which the candidate would read as that token, goes to `reference`."""

    def __init__(self, tok: Tokenizer, encode: FlatEncode, reference: FlatEncode) -> None:
        assert tok.normalizer is not None
        self.normalize = tok.normalizer.normalize_str
        self.encode = encode
        self.reference = reference
        raw = sorted(
            (t["content"] for t in json.loads(tok.to_str())["added_tokens"] if not t["normalized"]),
            key=len,
            reverse=True,
        )
        self.raw_tokens = re.compile("(" + "|".join(map(re.escape, raw)) + ")") if raw else None

    def normalized(self, text: str) -> str | None:
        """`text` normalized outside its special tokens; None where a normalized part
        holds a special token's text."""
        if self.raw_tokens is None:
            return self.normalize(text)
        if self.raw_tokens.search(text) is None:
            out = self.normalize(text)
            return None if self.raw_tokens.search(out) else out
        parts = self.raw_tokens.split(text)  # odd places hold the special tokens
        normal = [p if i % 2 else self.normalize(p) for i, p in enumerate(parts)]
        if any(self.raw_tokens.search(p) for p in normal[::2]):
            return None
        return "".join(normal)

    def __call__(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        normal = [self.normalized(t) for t in texts]
        kept = [n for n in normal if n is not None]
        if len(kept) == len(texts):
            return self.encode(kept)
        done = np.array([n is not None for n in normal], dtype=bool)
        first = self.encode(kept)
        second = self.reference([t for t, n in zip(texts, normal, strict=True) if n is None])
        return interleave(done, first, second)


# Text that is printable ASCII, tabs and line ends only. Candidates' normalizers differ
# most on control characters (tokie keeps DEL, which BERT's clean_text removes).
_NOT_PLAIN = re.compile(r"[^\t\n\r\x20-\x7e]")
PLAIN_PROBES = ("".join(map(chr, [9, 10, 13, *range(0x20, 0x7F)])),)


def is_plain(text: str) -> bool:
    return _NOT_PLAIN.search(text) is None


@functools.cache
def _controls() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Control, format and line or paragraph separator characters but tab and line ends:
    those in the BMP, and those past it. One class holding both is 50x slower to search
    (`re` checks a class with astral characters range by range)."""
    chars = [
        c for c in _special_characters() if unicodedata.category(c) != "Zs" and c not in "\t\n\r"
    ]
    bmp = "".join(c for c in chars if ord(c) < 0x10000)
    astral = "".join(c for c in chars if ord(c) >= 0x10000)
    return re.compile(f"[{re.escape(bmp)}]"), re.compile(f"[{re.escape(astral)}]")


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def has_no_controls(text: str) -> bool:
    """Without the characters where candidates' pre-tokenizers differ from `tokenizers`'
    (tokie splits whitespace runs with a vertical tab in them otherwise)."""
    bmp, astral = _controls()
    if bmp.search(text) is not None:
        return False
    return _ASTRAL.search(text) is None or astral.search(text) is None


# ASCII control characters but tab and line ends: an ASCII text without them is plain to
# both routes (`is_plain`, `has_no_controls`), and bytes.translate finds them in a whole
# batch at once, where a regex search per sentence took most of the routing time.
_ASCII_CONTROLS = bytes([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F])


def routes(texts: Sequence[str], route: Callable[[str], bool]) -> np.ndarray:
    """`route(text)` for every text, as booleans; ASCII texts are told apart by their
    control characters alone, which is what either route says of them."""
    is_ascii = list(map(str.isascii, texts))
    ascii_texts = list(itertools.compress(texts, is_ascii))
    joined = "\n".join(ascii_texts).encode("ascii")
    out = np.array(is_ascii, dtype=bool)
    if len(joined.translate(None, _ASCII_CONTROLS)) != len(joined):
        out[out] = list(map(_has_no_ascii_controls, ascii_texts))
    if len(ascii_texts) < len(texts):
        others = np.flatnonzero(~np.array(is_ascii, dtype=bool))
        out[others] = [route(texts[i]) for i in others.tolist()]
    return out


def _has_no_ascii_controls(text: str) -> bool:
    raw = text.encode("ascii")
    return len(raw.translate(None, _ASCII_CONTROLS)) == len(raw)


class SplitEncoder:
    """Texts `route` takes to `plain`, the others to `other`, ids back in order. `route`
    must take an ASCII text to `plain` exactly when it has no control character but tab
    and line ends (`routes`)."""

    def __init__(
        self, plain: FlatEncode, other: FlatEncode, route: Callable[[str], bool] = is_plain
    ) -> None:
        self.plain = plain
        self.other = other
        self.route = route

    def __call__(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        in_plain = routes(texts, self.route)
        if in_plain.all():
            return self.plain(texts)
        if not in_plain.any():
            return self.other(texts)
        first = self.plain([t for t, p in zip(texts, in_plain, strict=True) if p])
        second = self.other([t for t, p in zip(texts, in_plain, strict=True) if not p])
        return interleave(in_plain, first, second)


# Tried beside the vocabulary's own characters: Latin-1, Latin Extended-A and -B, general
# punctuation and currency signs (what English documents hold beyond ASCII: ©, é, ’, —).
_COMMON_BLOCKS = (range(0xA0, 0x250), range(0x2000, 0x2070), range(0x20A0, 0x20D0))


def _contexts(char: str) -> str:
    """A character alone, inside a word, inside a capitalized word, and doubled."""
    return f"a{char}b {char} A{char}B {char}{char}"


def _viterbi_unk_id(spec: str) -> int | None:
    """The unknown piece's id of a Unigram tokenizer.json (None for other kinds, or
    without one)."""
    model = json.loads(spec).get("model", {})
    unk = model.get("unk_id") if model.get("type") == "Unigram" else None
    return unk if isinstance(unk, int) else None


def agreeing_characters(candidate: FlatEncode, reference: FlatEncode, chars: Sequence[str]) -> str:
    """Those of `chars` where `candidate` gives `reference`'s ids in every `_contexts`.
    Marks, controls, spaces and Hangul's conjoining letters are never taken: they combine
    with the character before them, so one character's agreement says nothing of them."""
    chars = [
        c
        for c in dict.fromkeys(chars)
        if unicodedata.category(c)[0] not in "CMZ" and not 0x1100 <= ord(c) <= 0x11FF
    ]
    return proven_characters(candidate, reference, chars, _contexts)


class CharacterRoute:
    """True for texts of printable ASCII, tabs, line ends and `chars` only."""

    def __init__(self, chars: str) -> None:
        self.chars = chars
        self.other = re.compile(f"[^\\t\\n\\r\\x20-\\x7e{re.escape(chars)}]")

    def __call__(self, text: str) -> bool:
        return self.other.search(text) is None


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


@functools.cache
def _special_characters() -> str:
    """Every control, format, space and line or paragraph separator character. The planes
    scanned are the only ones with such characters (the tags block of plane 14 among
    them)."""
    return "".join(
        c
        for c in map(chr, itertools.chain(range(0x30000), range(0xE0000, 0xE1000)))
        if unicodedata.category(c) in ("Cc", "Cf", "Zs", "Zl", "Zp")
    )


@functools.cache
def control_probes() -> tuple[str, ...]:
    """Every control, format and space character, alone and run together, and the space
    characters alone likewise: where normalizers and pre-tokenizers differ most (BERT's
    clean_text drops or maps every one of them). Built on first use."""
    chars = _special_characters()
    spaces = "".join(c for c in chars if unicodedata.category(c) == "Zs")
    return " ".join(chars), f"a{chars}b", " ".join(spaces), f"a{spaces}b"


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


def _gives(encode: FlatEncode, probes: list[str], want: tuple[np.ndarray, np.ndarray]) -> bool:
    try:
        ids, lengths = encode(probes)
    except Exception:  # a candidate that fails on the probes is not exact, so not used
        return False
    return np.array_equal(ids, want[0]) and np.array_equal(lengths, want[1])


def _loaded(load: Callable[[str], FlatEncode], spec: str) -> FlatEncode | None:
    try:
        return load(spec)
    except Exception:  # a candidate that cannot read this form of the file
        return None


def _split(
    tok: Tokenizer,
    load: Callable[[str], FlatEncode],
    whole: FlatEncode | None,
    probes: list[str],
    want: tuple[np.ndarray, np.ndarray],
    alphabet: str,
) -> FlatEncode | None:
    """The candidate where it gives every id (`want`: `tokenizers`' on `probes`). Texts
    without control characters go to it reading the tokenizer.json with its normalizer less
    the steps that leave ASCII as it is; where there were such steps, only plain ASCII
    texts, and texts of ASCII and characters it agrees on (of `alphabet` and
    `_COMMON_BLOCKS`) to `whole`, the candidate reading the whole file. The others go to it behind
    `tokenizers`' normalizer, or else to `tokenizers`. None if the candidate takes none."""
    spec = tok.to_str()
    reference = tokenizers_encoder(tok)
    normalizer = json.loads(spec)["normalizer"]
    reduced = _without(normalizer, ASCII_IDENTITY)
    route = is_plain if reduced != normalizer else has_no_controls
    plain_probes = [p for p in [*probes, *PLAIN_PROBES] if route(p)]
    plain = _loaded(load, _with_normalizer(spec, reduced))
    if plain is not None and not _gives(plain, plain_probes, reference(plain_probes)):
        plain = None
    other: FlatEncode | None = None
    if normalizer is not None:
        bare = _loaded(load, _with_normalizer(spec, None))
        behind = None if bare is None else Prenormalized(tok, bare, reference)
        if behind is not None and _gives(behind, probes, want):
            other = behind
    checks = list(probes)
    if whole is not None and route is is_plain:
        common = "".join(map(chr, itertools.chain(*_COMMON_BLOCKS)))
        chars = agreeing_characters(whole, reference, alphabet + common)
        if chars:
            other = SplitEncoder(whole, other or reference, CharacterRoute(chars))
            # the agreeing characters run together, and a letter in words about as long
            # as WordPiece's longest (100 characters)
            checks += [chars[i : i + 300] for i in range(0, len(chars), 300)]
            checks += [" ".join(chars[i : i + 40] for i in range(0, len(chars), 40))]
            letter = next((c for c in chars if unicodedata.category(c)[0] == "L"), "")
            checks += [letter * n for n in (99, 100, 101, 200) if letter]
    if plain is None and other is None:
        return None
    split = SplitEncoder(plain or other or reference, other or reference, route)
    extra = checks[len(probes) :]
    if extra:
        ids, lengths = reference(extra)
        want = (np.concatenate([want[0], ids]), np.concatenate([want[1], lengths]))
    return split if _gives(split, checks, want) else None


def package_label(name: str) -> str:
    """A package's name and installed version, as the manifest records an encoder."""
    try:
        return f"{name} {importlib.metadata.version(name)}"
    except importlib.metadata.PackageNotFoundError:
        return name


def fast_encoder(tok: Tokenizer) -> tuple[str, Guarded | Counted]:
    """(name, encode) of the fastest candidate and way ("tokie", or "tokie+split" behind
    `tokenizers`' normalizer) that gives `tok`'s ids on every probe and alphabet probe,
    guarded (`proven.Guarded`): it takes only texts inside the domain proven for it, and
    `tokenizers` the others; or ("tokenizers", its own encode). Either way `encode.counts`
    tallies the texts each encoder took. `tok` must neither truncate nor pad."""
    reference = tokenizers_encoder(tok)
    label = package_label("tokenizers")
    if os.environ.get(ENCODER_VARIABLE) == "tokenizers":
        return "tokenizers", Counted(reference, label)
    spec = tok.to_str()
    alphabet = alphabet_probes(tok)
    probes = [*PROBES, *control_probes(), *alphabet]
    want = reference(probes)
    unreadable = []
    for name, load in CANDIDATES.items():
        if importlib.util.find_spec(name) is None:
            continue
        whole: FlatEncode | None = None
        chosen: FlatEncode | None = None
        try:
            whole = load(spec)
        except Exception as err:  # a candidate that cannot read this tokenizer.json
            unreadable.append(f"{name} ({str(err).splitlines()[0][:80]})")
        else:
            if _gives(whole, probes, want):
                chosen = whole
        way = name
        if chosen is None:
            chosen = _split(tok, load, whole, probes, want, "".join(alphabet).replace(" ", ""))
            way = f"{name}+split"
        if chosen is None:
            continue
        chars = proven_characters(chosen, reference)
        unk_id = _viterbi_unk_id(spec)
        if unk_id is not None:
            # Past a character with no piece, tokie's Viterbi breaks ties between equal
            # segmentations ("00"+"000" or "000"+"00") otherwise than tokenizers does.
            unknown = set(unknown_characters(reference, chars, unk_id))
            chars = "".join(c for c in chars if c not in unknown)
        if chars:
            labels = (f"{package_label(name)}{way[len(name) :]}", label)
            normalize = tok.normalizer.normalize_str if tok.normalizer else str
            forms = run_forms(normalize, chars)
            limit = run_limit(tok.get_vocab())
            return way, Guarded(chosen, reference, chars, labels, limit, forms)
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
    return "tokenizers", Counted(reference, label)
