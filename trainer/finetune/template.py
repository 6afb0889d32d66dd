"""Fine-tuning inputs from the fastest exact encoder (issue 39): the texts' pieces come
from corpus/vocab/fast.py, and the special tokens around them from a template read off
the tokenizer's own post-processor, cut as `tokenizers`' `longest_first` cuts. The ids,
token types and cut counts are `Tokenizer.encode_batch`'s (tests/trainer/finetune/
test_template.py); a post-processor whose output is not such a template is left to
`tokenizers` (`read_template` gives None).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from tokenizers import Encoding, Tokenizer, models, pre_tokenizers

from clozeworks.schemas.errors import BadInputError

# In `Template.parts`: where the first and the second text go; other entries are ids.
TEXT_A, TEXT_B = -1, -2
# Probes to read a template from: several pieces each, so a type change inside a text shows.
_PROBES = (("a b c", "d e f"), ("The end.", "Yes, it is."))
# Where `cuts_as_tokenizers` compares the cuts: every branch of `cut_pair` (neither, one or
# both texts cut; either one longer; rooms odd and even), many times over.
_CUT_LENGTHS, _CUT_ROOMS = range(14), range(1, 12)


@dataclass(frozen=True)
class Template:
    """What the post-processor makes of one text (or a pair): special token ids and the
    texts' places, each with its token type."""

    parts: tuple[int, ...]
    types: tuple[int, ...]

    @property
    def added(self) -> int:
        return sum(p >= 0 for p in self.parts)

    def room(self, max_len: int) -> int:
        """Pieces of text that fit in `max_len` beside the special tokens."""
        if max_len < self.added:
            raise BadInputError(
                f"max_seq_len {max_len} leaves no room beside {self.added} special tokens"
            )
        return max_len - self.added

    def fill(self, a: Sequence[int], b: Sequence[int] = ()) -> tuple[list[int], list[int]]:
        """(ids, token types) with `a` and `b` in their places."""
        ids: list[int] = []
        types: list[int] = []
        for part, kind in zip(self.parts, self.types, strict=True):
            text = a if part == TEXT_A else b if part == TEXT_B else None
            if text is None:
                ids.append(part)
                types.append(kind)
            else:
                ids.extend(text)
                types.extend([kind] * len(text))
        return ids, types


def _read(enc: Encoding) -> Template | None:
    parts: list[int] = []
    types: list[int] = []
    previous = None
    for sequence, kind, piece in zip(enc.sequence_ids, enc.type_ids, enc.ids, strict=True):
        if sequence is None:
            parts.append(piece)
            types.append(kind)
        elif sequence != previous:
            parts.append(TEXT_A if sequence == 0 else TEXT_B)
            types.append(kind)
        elif kind != types[-1]:
            return None  # token types change inside a text
        previous = sequence
    return Template(tuple(parts), tuple(types))


def read_template(tok: Tokenizer, pair: bool) -> Template | None:
    """The template `tok`'s post-processor follows, if its output on every probe is the
    probe's pieces put in one; `tok` must neither truncate nor pad."""
    found = None
    for a, b in _PROBES:
        second = b if pair else None
        try:
            enc = tok.encode(a, second)
        except Exception:  # `tokenizers` raises bare Exceptions (no pair template, say)
            return None
        template = _read(enc)
        if template is None or found not in (None, template):
            return None
        if TEXT_A not in template.parts or (pair and TEXT_B not in template.parts):
            return None
        pieces = [tok.encode(t, add_special_tokens=False).ids for t in (a, b)]
        if template.fill(*pieces[: 1 + pair]) != (enc.ids, enc.type_ids):
            return None
        found = template
    return found


def cut_pair(n_a: int, n_b: int, room: int) -> tuple[int, int]:
    """How many pieces of each text `tokenizers`' `longest_first` keeps when `room` pieces
    are left beside the special tokens: the longer text is cut first, and when both must
    be cut each keeps half (the longer one, or else the second, one more when `room` is
    odd)."""
    if n_a + n_b <= room:
        return n_a, n_b
    short, long = sorted((n_a, n_b))
    long = short if short > room else max(short, room - short)
    if short + long > room:
        short = room // 2
        long = short + room % 2
    return (long, short) if n_a > n_b else (short, long)


@cache
def cuts_as_tokenizers() -> bool:
    """Whether the installed `tokenizers` cuts pairs as `cut_pair` does. Its `longest_first`
    is not the same in every release (0.20 to 0.22 and 0.23.3 agree with `cut_pair`; 0.23.2
    gives an odd room's extra piece by a rule of its own), so it is read off, once per
    process, on a word-level tokenizer made here; where it differs, pairs are left to
    `tokenizers`."""
    vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in _CUT_LENGTHS}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    texts = [" ".join(f"w{i}" for i in range(n)) for n in _CUT_LENGTHS]
    lengths = [(a, b) for a in _CUT_LENGTHS for b in _CUT_LENGTHS]
    for room in _CUT_ROOMS:
        tok.enable_truncation(room, strategy="longest_first")
        encodings = tok.encode_batch([(texts[a], texts[b]) for a, b in lengths])
        for (a, b), enc in zip(lengths, encodings, strict=True):
            kept = (enc.sequence_ids.count(0), enc.sequence_ids.count(1))
            if kept != cut_pair(a, b, room):
                return False
    return True
