"""Where a fast encoder is proven to give `tokenizers`' ids, and the guard that sends every
other text to `tokenizers`.

A candidate (corpus/vocab/fast.py) that passes the probe texts can still differ on text the
probes never hold: tested from outside, tokie split a tab before a contraction
(`"\\t's"`) otherwise, cut a token of 256 bytes (128 `é` in a row, where the vocabulary
had merged the run) in two, chunked pre-tokens of about 10 KB, dropped unassigned code
points where `tokenizers` gives `[UNK]`, and classed punctuation added in Unicode 10-14 as
letters. So the fast path takes a text only inside a domain proven when the encoder is
chosen, and `tokenizers` encodes the rest:
- every character of the text is one on which the candidate gives `tokenizers`' ids in
  every one of `contexts` (alone, inside words, after digits and a tab, doubled, repeated,
  before a contraction). The characters tried are every assigned character of the Basic
  Multilingual Plane; a character past it, unassigned in this Python's Unicode (14.0 for
  3.11), private or a surrogate is never taken;
- no run of `run_limit` characters without whitespace, or of whitespace: a pre-token is at
  most that long. That is `LONG_RUN` (1024 characters, at most 3 KB in the Basic
  Multilingual Plane, well below where tokie chunks) for a vocabulary whose longest token
  has fewer than `LONG_TOKEN_BYTES`, else `SHORT_RUN` (64 characters, at most 192 bytes,
  so no token of 256 bytes can be met). Runs are counted as the normalizer leaves them
  (`run_forms`): a Hangul syllable decomposed into jamo (`--hangul jamo`) is nine bytes,
  three characters of a run, and a CJK ideograph with spaces put around it ends one;
- no tab before an apostrophe (the one pattern of ASCII characters where tokie's
  pre-tokenizer differs: tests/corpus/vocab/test_exact.py tries every three ASCII
  characters).
tests/corpus/vocab/test_exact.py holds the proof to every code point in those contexts, to
real text in more than 15 languages and to generated text, for every vocabulary kind.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

# texts -> (every text's ids concatenated, each text's length)
FlatEncode = Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]

SHORT_RUN = 64
LONG_RUN = 1024
LONG_TOKEN_BYTES = 250
# The one ASCII pattern found where tokie's pre-tokenizer differs from `tokenizers`'
# (byte-level BPE: `'s`, `'t`, `'m`, `'d` after a tab), kept out for every kind.
HAZARDS = (r"\t'",)
_HAZARD = re.compile("|".join(HAZARDS) or "(?!)")
# Characters' contexts compared at once; a group that differs is compared one by one.
GROUP = 64


def contexts(char: str) -> str:
    """A character alone, inside a word and a capitalized word, between digits, after a
    tab, doubled, before a contraction and repeated; less the contexts the guard refuses
    anyway (a tab before `'s`), which would rule the character out everywhere."""
    parts = [f"a{char}b", char, f"A{char}{char}B", f"1{char}2", f"\t{char}", f"{char}'s"]
    parts.append(f"x{char * 8}y")
    return " ".join(p for p in parts if _HAZARD.search(p) is None)


def candidate_characters() -> list[str]:
    """Every assigned character of the Basic Multilingual Plane but surrogates and private
    use: what a proof is sought for."""
    return [
        c for c in map(chr, range(0x10000)) if unicodedata.category(c) not in ("Cn", "Cs", "Co")
    ]


def same_per_text(a: FlatEncode, b: FlatEncode, texts: list[str]) -> list[bool]:
    """For each text, whether `a` and `b` give it the same ids; all False if `a` fails."""
    try:
        got, want = a(texts), b(texts)
    except Exception:  # a candidate that fails here agrees on nothing
        return [False] * len(texts)
    return same_each(got, want)


def same_each(
    got: tuple[np.ndarray, np.ndarray], want: tuple[np.ndarray, np.ndarray]
) -> list[bool]:
    """Per text, whether two flat encodings (ids, lengths) of the same texts agree."""
    (a_ids, a_len), (b_ids, b_len) = got, want
    a_at, b_at = np.cumsum(a_len) - a_len, np.cumsum(b_len) - b_len
    rows = zip(a_at.tolist(), a_len.tolist(), b_at.tolist(), b_len.tolist(), strict=True)
    return [
        n == m and bool(np.array_equal(a_ids[i : i + n], b_ids[j : j + m])) for i, n, j, m in rows
    ]


def proven_characters(
    candidate: FlatEncode,
    reference: FlatEncode,
    chars: Sequence[str] | None = None,
    contexts_of: Callable[[str], str] = contexts,
) -> str:
    """Those of `chars` (by default `candidate_characters()`) on which `candidate` gives
    `reference`'s ids in every one of `contexts_of(char)`, sorted."""
    chars = list(dict.fromkeys(candidate_characters() if chars is None else chars))
    groups = [chars[i : i + GROUP] for i in range(0, len(chars), GROUP)]
    same = same_per_text(candidate, reference, [" ".join(map(contexts_of, g)) for g in groups])
    out = [c for g, ok in zip(groups, same, strict=True) if ok for c in g]
    doubtful = [c for g, ok in zip(groups, same, strict=True) if not ok for c in g]
    if doubtful:
        ok_each = same_per_text(candidate, reference, [contexts_of(c) for c in doubtful])
        out += [c for c, ok in zip(doubtful, ok_each, strict=True) if ok]
    return "".join(sorted(out))


def unknown_characters(reference: FlatEncode, chars: str, unk_id: int) -> str:
    """Those of `chars` that `reference` encodes, alone, with `unk_id`: characters the
    vocabulary has no piece for."""
    ids, lengths = reference(list(chars))
    owner = np.repeat(np.arange(len(chars)), lengths)
    unknown = np.bincount(owner[ids == unk_id], minlength=len(chars)) > 0
    return "".join(c for c, k in zip(chars, unknown.tolist(), strict=True) if k)


def character_class(chars: str) -> str:
    """A regex character class body matching exactly `chars`, as ranges."""
    codes = sorted(set(map(ord, chars)))
    parts = []
    for _, run in itertools.groupby(enumerate(codes), lambda ic: ic[1] - ic[0]):
        block = [c for _, c in run]
        lo, hi = re.escape(chr(block[0])), re.escape(chr(block[-1]))
        parts.append(lo if len(block) == 1 else f"{lo}-{hi}")
    return "".join(parts)


def run_forms(normalize: Callable[[str], str], chars: str) -> dict[str, str]:
    """What each of `chars` is to a run once normalized, where that is not one character
    of at most three bytes: its normalized form with each character as `x`, or as `xx`,
    `xxx` where it takes more bytes (a syllable as jamo is `xxx`), spaces kept (CJK's
    spacing), nothing for a character the normalizer removes. Whitespace is left as it is."""
    out = {}
    for c in chars:
        if c.isspace():
            continue
        form = "".join(ch if ch.isspace() else "x" * _thirds(ch) for ch in normalize(c))
        if form != "x":
            out[c] = form
    return out


def _thirds(ch: str) -> int:
    return -(-len(ch.encode("utf-8", "surrogatepass")) // 3)


def run_limit(vocabulary: Iterable[str]) -> int:
    """The longest run of non-space (or space) characters the fast path takes, for a
    vocabulary (its tokens' text; its longest, in UTF-8, bounds the bytes a token stands
    for from above)."""
    longest = max((len(t.encode("utf-8")) for t in vocabulary), default=0)
    return SHORT_RUN if longest >= LONG_TOKEN_BYTES else LONG_RUN


class Guarded:
    """`fast` for the texts inside the domain proven for it (only `chars`, no run of
    `longest_run` characters, no hazard), `reference` for the others; ids back in the
    texts' order. `counts` tallies the texts each encoded, under `labels` (fast's,
    reference's)."""

    def __init__(
        self,
        fast: FlatEncode,
        reference: FlatEncode,
        chars: str,
        labels: tuple[str, str],
        longest_run: int = SHORT_RUN,
        forms: Mapping[str, str] | None = None,
    ) -> None:
        self.fast = fast
        self.reference = reference
        self.chars = chars
        self.longest_run = longest_run
        self.other_char = re.compile(f"[^{character_class(chars)}]" if chars else ".", re.DOTALL)
        # Anchored after a character of the other kind, so each run is scanned once.
        n = longest_run
        self.runs = re.compile(rf"(?<!\S)\S{{{n}}}|(?<!\s)\s{{{n}}}")
        # Runs are measured on the text as the normalizer makes it (`run_forms`): a run
        # that can reach `n` that way holds at least `n / widest` characters as written.
        forms = dict(forms or {})
        self.forms = {ord(c): f for c, f in forms.items()}
        widest = max(map(len, forms.values()), default=1)
        self.maybe = re.compile(rf"\S{{{-(-n // max(widest, 1))}}}") if forms else None
        self.labels = labels
        self.label = labels[1]  # where `tokenizers` is counted, as in `Counted`
        self.counts = dict.fromkeys(labels, 0)

    def outside(self, text: str) -> bool:
        """Whether `text` leaves the proven domain."""
        return (
            self.other_char.search(text) is not None
            or _HAZARD.search(text) is not None
            or self._long_run(text)
        )

    def _long_run(self, text: str) -> bool:
        if self.maybe is not None:
            if self.maybe.search(text) is None:
                return self.runs.search(text) is not None  # whitespace runs
            text = text.translate(self.forms)
        return len(text) >= self.longest_run and self.runs.search(text) is not None

    def inside(self, texts: Sequence[str]) -> np.ndarray:
        """Whether each text is inside the proven domain. Characters and hazards are
        sought in the batch joined by line ends first (most batches have none), runs only
        in texts long enough to hold one."""
        joined = "\n".join(texts)
        if self.other_char.search(joined) is None and _HAZARD.search(joined) is None:
            n, runs = self.longest_run, self.runs
            if self.maybe is not None:
                long_run = self._long_run
                return np.fromiter((not long_run(t) for t in texts), dtype=bool, count=len(texts))
            return np.fromiter(
                (len(t) < n or runs.search(t) is None for t in texts),
                dtype=bool,
                count=len(texts),
            )
        outside = self.outside
        return np.fromiter((not outside(t) for t in texts), dtype=bool, count=len(texts))

    def __call__(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        inside = self.inside(texts)
        taken = int(inside.sum())
        self.counts[self.labels[0]] += taken
        self.counts[self.labels[1]] += len(texts) - taken
        if taken == len(texts):
            return self.fast(texts)
        if taken == 0:
            return self.reference(texts)
        first = self.fast([t for t, ok in zip(texts, inside, strict=True) if ok])
        second = self.reference([t for t, ok in zip(texts, inside, strict=True) if not ok])
        return interleave(inside, first, second)


class Counted:
    """`encode`, tallying the texts it takes under `label` (as `Guarded` does)."""

    def __init__(self, encode: FlatEncode, label: str) -> None:
        self.encode = encode
        self.counts = {label: 0}
        self.label = label

    def __call__(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        self.counts[self.label] += len(texts)
        return self.encode(texts)


def interleave(
    in_first: np.ndarray,
    first: tuple[np.ndarray, np.ndarray],
    second: tuple[np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """The flat ids of texts encoded in two groups, back in the texts' order; `in_first`
    says which texts the first group holds."""
    (ids_a, len_a), (ids_b, len_b) = first, second
    lengths = np.empty(len(in_first), dtype=np.int64)
    lengths[in_first] = len_a
    lengths[~in_first] = len_b
    source = np.empty(len(in_first), dtype=np.int64)  # each text's start in ids_a + ids_b
    source[in_first] = np.cumsum(len_a) - len_a
    source[~in_first] = len(ids_a) + np.cumsum(len_b) - len_b
    starts = np.cumsum(lengths) - lengths
    total = int(lengths.sum())
    positions = np.repeat(source - starts, lengths) + np.arange(total, dtype=np.int64)
    return np.concatenate([ids_a, ids_b])[positions], lengths
