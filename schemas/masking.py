"""Masking settings: one definition for the static writer and the trainer's dynamic masking.

Defaults are BERT's (Devlin et al. 2019, section 3.1): 15% of tokens, of which 80% become
`[MASK]`, 10% a random token and 10% stay unchanged. SpanBERT (Joshi et al. 2020) samples
span lengths from Geometric(0.2) clipped at 10 words; ALBERT (Lan et al. 2020, appendix
A.1) masks n-grams of up to 3 words with p(n) proportional to 1/n.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from clozeworks.schemas.errors import SchemaError
from clozeworks.schemas.kinds import MASK_KINDS, MaskKind
from clozeworks.schemas.validate import Fields

# How the 10% random replacements are drawn: uniformly over the vocabulary (BERT's and
# ALBERT's create_pretraining_data.py) or by corpus frequency (SpanBERT's masking.py).
REPLACEMENTS = ("uniform", "frequency")
# How many positions a sequence's budget is: `maskable` is round(prob x its maskable tokens),
# at least 1 (ours: [CLS] and [SEP] can never be chosen, so they do not count);
# `reference` is what the kind's reference code computes: BERT's and ALBERT's
# max(1, round(prob x all tokens)), [CLS] and [SEP] included, and SpanBERT's
# ceil(prob x the tokens between them); `electra` is ELECTRA's pretrain_helpers.mask (token
# masking only): BERT's count of uniform draws with replacement, a repeat masking nothing
# more (about 14% of maskable tokens at 128 and 512 instead of 15%).
BUDGETS = ("maskable", "reference", "electra")


@dataclass(frozen=True)
class MaskingSettings:
    kind: MaskKind = "token"
    prob: float = 0.15
    mask_ratio: float = 0.8
    random_ratio: float = 0.1
    # Upper bound on predictions per sequence; None means no bound beyond the budget.
    max_predictions: int | None = None
    span_p: float = 0.2
    span_max_words: int = 10
    ngram_max: int = 3
    # None: the kind's reference ("frequency" for span, "uniform" otherwise).
    replacement: str | None = None
    budget: str = "maskable"

    def __post_init__(self) -> None:
        if self.kind not in MASK_KINDS:
            raise ValueError(f"masking kind {self.kind!r} is not one of {', '.join(MASK_KINDS)}")
        if not 0.0 < self.prob < 1.0:
            raise ValueError(f"masking prob must be in (0, 1), got {self.prob}")
        if self.mask_ratio < 0 or self.random_ratio < 0 or self.mask_ratio + self.random_ratio > 1:
            raise ValueError(
                "mask_ratio and random_ratio must be >= 0 and sum to at most 1, got "
                f"{self.mask_ratio} + {self.random_ratio}"
            )
        if self.max_predictions is not None and self.max_predictions < 1:
            raise ValueError(f"max_predictions must be >= 1, got {self.max_predictions}")
        if not 0.0 < self.span_p <= 1.0 or self.span_max_words < 1 or self.ngram_max < 1:
            raise ValueError("span_p must be in (0, 1], span_max_words and ngram_max >= 1")
        if self.budget not in BUDGETS:
            raise ValueError(f"budget {self.budget!r} is not one of {', '.join(BUDGETS)}")
        if self.budget == "electra" and self.kind != "token":
            raise ValueError(f"budget 'electra' draws single tokens; kind is {self.kind!r}")
        if self.replacement is not None and self.replacement not in REPLACEMENTS:
            raise ValueError(
                f"replacement {self.replacement!r} is not one of {', '.join(REPLACEMENTS)}"
            )

    @property
    def draws_by_frequency(self) -> bool:
        """Random replacements follow corpus token frequencies (SpanBERT's default)."""
        chosen = self.replacement or ("frequency" if self.kind == "span" else "uniform")
        return chosen == "frequency"

    @property
    def keep_ratio(self) -> float:
        return 1.0 - self.mask_ratio - self.random_ratio

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_fields(cls, f: Fields) -> MaskingSettings:
        max_pred = f.data.get("max_predictions")
        max_predictions = None if max_pred is None else f.get_int("max_predictions", minimum=1)
        try:
            return cls(
                kind=f.get_choice("kind", MASK_KINDS),
                prob=f.get_float("prob"),
                mask_ratio=f.get_float("mask_ratio"),
                random_ratio=f.get_float("random_ratio"),
                max_predictions=max_predictions,
                span_p=f.get_float("span_p", 0.2),
                span_max_words=f.get_int("span_max_words", 10, minimum=1),
                ngram_max=f.get_int("ngram_max", 3, minimum=1),
                replacement=f.data.get("replacement"),
                budget=f.get_choice("budget", BUDGETS, "maskable"),
            )
        except ValueError as err:
            raise SchemaError(f.source, f.path or "masking", str(err)) from None
