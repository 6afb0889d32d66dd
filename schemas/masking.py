"""Masking settings: one definition for the static writer and the trainer's dynamic masking.

Defaults are BERT's (Devlin et al. 2019, section 3.1): 15% of tokens, of which 80% become
`[MASK]`, 10% a random token and 10% stay unchanged. SpanBERT (Joshi et al. 2020) samples
span lengths from Geometric(0.2) clipped at 10 words; ALBERT (Lan et al. 2020, appendix
A.1) masks n-grams of up to 3 words with p(n) proportional to 1/n.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from clozeworks.schemas.errors import SchemaError, SettingError
from clozeworks.schemas.kinds import BUDGETS, MASK_KINDS, Budget, MaskKind, Replacement
from clozeworks.schemas.settings import check_choices, setting
from clozeworks.schemas.validate import Fields

# How many positions a sequence's budget is (kinds.Budget): `maskable` is round(prob x
# its maskable tokens), at least 1 (ours: [CLS] and [SEP] can never be chosen, so they do
# not count); `reference` is what the kind's reference code computes: BERT's and ALBERT's
# max(1, round(prob x all tokens)), [CLS] and [SEP] included, and SpanBERT's
# ceil(prob x the tokens between them); `electra` is ELECTRA's pretrain_helpers.mask (token
# masking only): BERT's count of uniform draws with replacement, a repeat masking nothing
# more (about 14% of maskable tokens at 128 and 512 instead of 15%).


@dataclass(frozen=True)
class MaskingSettings:
    kind: MaskKind = setting("token", "dynamic masking", flag="masking")
    prob: float = setting(
        0.15, "share of maskable tokens predicted", bounds=(0.0, 1.0), open_ends="both"
    )
    mask_ratio: float = setting(
        0.8, "share of the predicted tokens that become [MASK]", bounds=(0.0, 1.0)
    )
    random_ratio: float = setting(0.1, "share that become a random token", bounds=(0.0, 1.0))
    # None means no bound beyond the budget.
    max_predictions: int | None = setting(None, "most predictions per sequence", at_least=1)
    span_p: float = setting(
        0.2, "SpanBERT's geometric p of span lengths", bounds=(0.0, 1.0), open_ends="low"
    )
    span_max_words: int = setting(10, "longest span in words", at_least=1)
    ngram_max: int = setting(3, "longest n-gram (ALBERT)", at_least=1)
    # None: the kind's reference ("frequency" for span, "uniform" otherwise).
    replacement: Replacement | None = setting(None, "how random replacements are drawn")
    budget: Budget = setting("maskable", "how many positions a sequence's budget is")

    def __post_init__(self) -> None:
        try:
            check_choices(self)
        except SettingError as err:  # a manifest's masking is data: ValueError, then its file
            raise ValueError(f"masking {err}") from None
        if self.mask_ratio + self.random_ratio > 1:
            raise ValueError(
                "mask_ratio and random_ratio must be >= 0 and sum to at most 1, got "
                f"{self.mask_ratio} + {self.random_ratio}"
            )
        if self.budget == "electra" and self.kind != "token":
            raise ValueError(f"budget 'electra' draws single tokens; kind is {self.kind!r}")

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
