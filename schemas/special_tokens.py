"""Special-token conventions per vocabulary kind.

WordPiece follows BERT (`[PAD]` first so padding is id 0); BPE follows RoBERTa's
`<s> <pad> </s> <unk>` order, Unigram ALBERT's `<pad> <unk> ...` spirit with RoBERTa's
names. The order here is the order in which `cloze vocab` adds them, so their ids are
0, 1, 2, ... in that order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

VocabKind = Literal["wordpiece", "bpe", "unigram"]
VOCAB_KINDS: tuple[VocabKind, ...] = get_args(VocabKind)


@dataclass(frozen=True)
class SpecialTokens:
    """The five roles every clozeworks vocabulary has, and their training order."""

    pad: str
    unk: str
    cls: str
    sep: str
    mask: str
    order: tuple[str, ...]
    # How a vocabulary marks the first piece of a word (whole-word masking reads it).
    continuation_prefix: str | None = None
    word_start_prefix: str | None = None

    def roles(self) -> dict[str, str]:
        """Role name -> token string, e.g. {"cls": "[CLS]", ...}."""
        return {
            "pad": self.pad,
            "unk": self.unk,
            "cls": self.cls,
            "sep": self.sep,
            "mask": self.mask,
        }


WORDPIECE = SpecialTokens(
    pad="[PAD]",
    unk="[UNK]",
    cls="[CLS]",
    sep="[SEP]",
    mask="[MASK]",
    order=("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"),
    continuation_prefix="##",
)

BPE = SpecialTokens(
    pad="<pad>",
    unk="<unk>",
    cls="<s>",
    sep="</s>",
    mask="<mask>",
    order=("<s>", "<pad>", "</s>", "<unk>", "<mask>"),
    word_start_prefix="\u0120",  # "Ġ": byte-level BPE's encoding of a leading space
)

UNIGRAM = SpecialTokens(
    pad="<pad>",
    unk="<unk>",
    cls="<s>",
    sep="</s>",
    mask="<mask>",
    order=("<pad>", "<unk>", "<s>", "</s>", "<mask>"),
    word_start_prefix="\u2581",  # "▁": SentencePiece's word-boundary marker
)

_BY_KIND: dict[str, SpecialTokens] = {"wordpiece": WORDPIECE, "bpe": BPE, "unigram": UNIGRAM}


def special_tokens_for(kind: str) -> SpecialTokens:
    """The conventions of vocabulary `kind`; ValueError for an unknown kind."""
    try:
        return _BY_KIND[kind]
    except KeyError:
        raise ValueError(
            f"unknown vocabulary kind {kind!r}; expected one of {', '.join(VOCAB_KINDS)}"
        ) from None
