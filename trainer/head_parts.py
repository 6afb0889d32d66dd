"""What an objective adds to the encoder-with-heads model (trainer/pretraining.py): the
module it keeps, under which name (its checkpoint keys), and its loss on a batch.

An objective's registry entry (trainer/data/objective_specs.py, `head=`) names its part
here as `module:NAME`, so that a new objective is its module, one entry and one `Literal`
word; the families that build `Pretraining` (BERT, RoBERTa, ALBERT) train every objective
that has a part.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import nn

from clozeworks.trainer.batch_index import WSO_LABELS, flat_index
from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.heads import (
    MLMHead,
    Outputs,
    SentenceHead,
    SpanBoundaryHead,
    classification,
)


@dataclass(frozen=True)
class Encoded:
    """One batch through the encoder, as every head reads it."""

    h: torch.Tensor  # [B, L, H]
    flat: torch.Tensor  # [B * L, H]
    index: torch.Tensor  # [N] flat positions MLM predicts
    targets: torch.Tensor  # [N] their labels
    batch: dict[str, Any]
    # What one part computed that another reads (the MLM logits, a teacher's outputs).
    cache: dict[str, Any] = field(default_factory=dict)


class HeadPart(Protocol):
    # Where the model keeps the part's module (its checkpoint keys, what export maps);
    # None: it keeps none and reuses another's.
    attribute: str | None

    def build(self, config: ModelConfig, word: nn.Embedding) -> nn.Module | None: ...

    def loss(self, model: nn.Module, x: Encoded, out: Outputs) -> torch.Tensor: ...


@dataclass(frozen=True)
class MaskedTokens:
    """BERT's MLM: the masked tokens from their own positions."""

    attribute: str | None = "mlm"

    def build(self, config: ModelConfig, word: nn.Embedding) -> nn.Module:
        return MLMHead(config, word)

    def loss(self, model: nn.Module, x: Encoded, out: Outputs) -> torch.Tensor:
        logits = model.mlm(x.flat.index_select(0, x.index))  # [N, V]
        x.cache["mlm_logits"] = logits
        return classification(out, "mlm", logits, x.targets)


@dataclass(frozen=True)
class SentenceClass:
    """A label per pair from the pooled [CLS]: BERT's next sentence (2 classes), ALBERT's
    sentence order (2), StructBERT's next/previous/random (3)."""

    name: str
    classes: int
    label_key: str  # the loader's batch key (Hugging Face's name)
    attribute: str | None = "sentence"

    def build(self, config: ModelConfig, word: nn.Embedding) -> nn.Module:
        return SentenceHead(config.hidden_size, self.classes)

    def loss(self, model: nn.Module, x: Encoded, out: Outputs) -> torch.Tensor:
        logits = model.sentence(x.h)  # [B, C]
        return classification(out, self.name, logits, x.batch[self.label_key])


@dataclass(frozen=True)
class SpanBoundary:
    """SpanBERT's SBO: each masked token from its span's boundary tokens."""

    attribute: str | None = "sbo"

    def build(self, config: ModelConfig, word: nn.Embedding) -> nn.Module:
        return SpanBoundaryHead(config, word)

    def loss(self, model: nn.Module, x: Encoded, out: Outputs) -> torch.Tensor:
        return classification(out, "sbo", model.sbo(x.h, x.index, x.batch), x.targets)


@dataclass(frozen=True)
class WordOrder:
    """StructBERT's word structure objective: the shuffled tokens' originals, through the
    MLM head (the paper shares it)."""

    attribute: str | None = None

    def build(self, config: ModelConfig, word: nn.Embedding) -> None:
        return None

    def loss(self, model: nn.Module, x: Encoded, out: Outputs) -> torch.Tensor:
        shuffled = flat_index(x.batch, WSO_LABELS)  # [S]
        labels = x.batch[WSO_LABELS].flatten().index_select(0, shuffled)
        return classification(out, "wso", model.mlm(x.flat.index_select(0, shuffled)), labels)


MLM = MaskedTokens()
NSP = SentenceClass("nsp", 2, "next_sentence_label")
SOP = SentenceClass("sop", 2, "sentence_order_label")
SSO = SentenceClass("sso", 3, "sentence_order_label")
SBO = SpanBoundary()
WSO = WordOrder()


def resolve(path: str) -> HeadPart:
    """The part a registry entry names, `package.module:NAME`."""
    module, _, name = path.partition(":")
    part: HeadPart = getattr(importlib.import_module(module), name)
    return part
