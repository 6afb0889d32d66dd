"""A pretrained encoder with a task head, laid out as transformers' `...ForSequenceClassification`
of its family, so a fine-tuned model exports with the same logits.

| family | head on the first token ([CLS] / <s>) | transformers class |
|---|---|---|
| bert | dense + tanh (BERT's pooler), dropout, linear | `BertForSequenceClassification` |
| albert | dense + tanh (ALBERT's pooler), dropout, linear | `AlbertForSequenceClassification` |
| roberta, pre-LN | dropout, dense + tanh, dropout, linear | `Roberta[PreLayerNorm]ForSeq...` |
| electra | dropout, dense + gelu, dropout, linear | `ElectraForSequenceClassification` |
| distilbert | dense + ReLU (`pre_classifier`), dropout, linear | `DistilBertForSeq...` |
| bart | its own (models/bart.py): the last `</s>`, sequence tasks only | `BartForSeq...` |

BERT and ALBERT start the pooler from the pretrained sentence head (NSP / SOP) when the
run had one, as transformers does; everything else new is initialized like BERT
(normal(0, 0.02), zero biases).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.schemas.validate import read_json_object
from clozeworks.trainer.config import ModelConfig, TrainConfig
from clozeworks.trainer.export import special_ids
from clozeworks.trainer.families import (
    FAMILIES,
    build_encoder,
    build_model,
    family_of,
    transformers_family,
    transformers_objectives,
)
from clozeworks.trainer.models.bert import Encoder, init_weights

# The heads' activations by the name a family's layout gives.
ACTIVATIONS = {"tanh": torch.tanh, "gelu": F.gelu, "relu": F.relu}


@dataclass
class Backbone:
    """A pretrained model (heads included) as loaded from a run or a transformers directory."""

    config: TrainConfig
    model: nn.Module
    tokenizer: Path
    source: str

    @property
    def encoder(self) -> Encoder:
        model: Any = self.model
        encoder: Encoder = model.encoder  # ELECTRA's: its discriminator
        return encoder

    @property
    def pooler(self) -> nn.Linear | None:
        sentence = getattr(self.model, "sentence", None)
        return None if sentence is None else sentence.pooler


def load_backbone(path: Path, step: int | None = None) -> Backbone:
    """The model of a training run (newest or `step` checkpoint) or of a transformers
    directory (`cloze export`'s output, or any BERT-family model saved by transformers)."""
    from clozeworks.trainer.export import load_run
    from clozeworks.trainer.init_from import load_weights, locate, model_config

    src = locate(path)
    if src.kind == "run":
        if src.weights == src.path:  # a step directory: that checkpoint of its run
            if step is not None:
                raise UsageError(f"{path} is one checkpoint already; --step applies to a run")
            run, step = src.path.parent, int(src.path.name.removeprefix("step-"))
        else:
            run = src.path
        config, model, raw = load_run(run, step)
        tokenizer = Path(raw.get("tokenizer", ""))
    else:
        arch, _ = model_config(path, ModelConfig())
        hf = read_json_object(src.path / "config.json")
        family, _ = transformers_family(hf, src.path)
        config = TrainConfig(model=arch, objectives=transformers_objectives(family, hf))
        model = build_model(config)
        load_weights(model, config, path)
        tokenizer = src.path
    if not (tokenizer / "tokenizer.json").is_file():
        raise BadInputError(f"{path}: no tokenizer.json (looked in {tokenizer})")
    family = family_of(config.model)
    if family.encoder is None and family.own_classifier is None:
        fine = ", ".join(n for n, f in FAMILIES.items() if f.encoder or f.own_classifier)
        raise UsageError(
            f"{path} is a {config.model.family} model, with no BERT-style encoder to "
            f"fine-tune; fine-tuning takes {fine}"
        )
    return Backbone(config, model.eval(), tokenizer, str(path))


# Task shapes a family's own classifier takes (BART's: one sequence, a pair, a score).
OWN_SHAPES = ("single", "pair", "regression")


def check_fits(config: TrainConfig, shape: str, entities: bool) -> None:
    """UsageError unless a model of `config` fine-tunes a task of `shape` (with entity
    markers: `entities`): a family with its own classifier takes sequence tasks only."""
    family = family_of(config.model)
    if family.encoder is not None:
        return
    if shape not in OWN_SHAPES or entities:
        what = "a relation task (its entity markers)" if entities else f"a {shape} task"
        raise UsageError(
            f"a {family.name} model fine-tunes {', '.join(OWN_SHAPES)} tasks with its own "
            f"classifier, not {what}"
        )


def randomized(backbone: Backbone, seed: int) -> Backbone:
    """The same architecture and tokenizer with weights from `seed` alone: the baseline
    that shows what pretraining adds."""
    config = replace(backbone.config, seed=seed)
    return Backbone(config, build_model(config).eval(), backbone.tokenizer, "random init")


class SequenceHead(nn.Module):
    """First token -> [B, C] logits (C = 1 for regression), in the family's layout."""

    def __init__(self, config: ModelConfig, outputs: int) -> None:
        super().__init__()
        layout = family_of(config).layout
        assert layout is not None  # an encoder family
        self.layout = layout(config)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.out = nn.Linear(config.hidden_size, outputs)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        x = h[:, 0]  # [B, H]
        activation = ACTIVATIONS[self.layout.activation]
        if self.layout.pooled:
            return self.out(self.dropout(activation(self.dense(x))))  # [B, C]
        x = activation(self.dense(self.dropout(x)))
        return self.out(self.dropout(x))  # [B, C]


class SequenceModel(nn.Module):
    """Encoder + SequenceHead: one sentence or a pair -> class logits or a score."""

    def __init__(self, config: ModelConfig, encoder: Encoder, outputs: int) -> None:
        super().__init__()
        self.config = config
        self.encoder = encoder
        self.head = SequenceHead(config, outputs)
        self.head.apply(partial(init_weights, std=config.initializer_range))

    @property
    def outputs(self) -> int:
        return self.head.out.out_features

    @classmethod
    def from_backbone(cls, backbone: Backbone, outputs: int) -> SequenceModel:
        model = cls(backbone.config.model, backbone.encoder, outputs)
        pooler = backbone.pooler
        if pooler is not None and model.head.layout.pooled:
            model.head.dense.load_state_dict(pooler.state_dict())
        return model

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        h = self.encoder(input_ids, attention_mask, token_type_ids)  # [B, L, H]
        return self.head(h)  # [B, C]


class TokenModel(nn.Module):
    """Encoder + dropout + a linear layer on every token: [B, L] ids -> [B, L, C] logits, as
    transformers' `...ForTokenClassification` of every family."""

    def __init__(self, config: ModelConfig, encoder: Encoder, outputs: int) -> None:
        super().__init__()
        self.config = config
        self.encoder = encoder
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.hidden_size, outputs)
        self.classifier.apply(partial(init_weights, std=config.initializer_range))

    @classmethod
    def from_backbone(cls, backbone: Backbone, outputs: int) -> TokenModel:
        return cls(backbone.config.model, backbone.encoder, outputs)

    @property
    def outputs(self) -> int:
        return self.classifier.out_features

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        h = self.encoder(input_ids, attention_mask, token_type_ids)  # [B, L, H]
        return self.classifier(self.dropout(h))  # [B, L, C]


class QAModel(nn.Module):
    """Encoder + a linear layer to (start, end) logits on every token: [B, L] -> [B, L, 2],
    as transformers' `...ForQuestionAnswering` of every family."""

    def __init__(self, config: ModelConfig, encoder: Encoder, outputs: int = 2) -> None:
        super().__init__()
        self.config = config
        self.encoder = encoder
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.qa_outputs.apply(partial(init_weights, std=config.initializer_range))

    @classmethod
    def from_backbone(cls, backbone: Backbone, outputs: int = 2) -> QAModel:
        return cls(backbone.config.model, backbone.encoder)

    @property
    def outputs(self) -> int:
        return 2

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        h = self.encoder(input_ids, attention_mask, token_type_ids)  # [B, L, H]
        return self.qa_outputs(h)  # [B, L, 2]


class ChoiceModel(nn.Module):
    """Encoder + a score per option: each option's row [CLS] context [SEP] option [SEP] is
    encoded alone, its first token goes through a dense layer and the family's activation
    (BERT's, ALBERT's and RoBERTa's pooler; ELECTRA's sequence summary), dropout and a
    linear layer to one number; [B, C, L] ids -> [B, C] scores, softmaxed over the options
    by the loss, as transformers' `...ForMultipleChoice` of every family."""

    def __init__(self, config: ModelConfig, encoder: Encoder, outputs: int = 1) -> None:
        super().__init__()
        layout = family_of(config).layout
        assert layout is not None  # an encoder family
        self.activation = layout(config).activation
        self.config = config
        self.encoder = encoder
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.dense.apply(partial(init_weights, std=config.initializer_range))
        self.classifier.apply(partial(init_weights, std=config.initializer_range))

    @classmethod
    def from_backbone(cls, backbone: Backbone, outputs: int = 1) -> ChoiceModel:
        model = cls(backbone.config.model, backbone.encoder)
        if backbone.pooler is not None:  # the pretrained NSP / SOP pooler, as transformers
            model.dense.load_state_dict(backbone.pooler.state_dict())
        return model

    @property
    def outputs(self) -> int:
        return 1

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        choices = input_ids.shape[1]
        types = None if token_type_ids is None else token_type_ids.flatten(0, 1)
        h = self.encoder(input_ids.flatten(0, 1), attention_mask.flatten(0, 1), types)
        x = ACTIVATIONS[self.activation](self.dense(h[:, 0]))  # [B * C, H]
        return self.classifier(self.dropout(x)).view(-1, choices)  # [B, C]


TaskModel = SequenceModel | TokenModel | QAModel | ChoiceModel
MODELS: dict[str, Any] = {"tokens": TokenModel, "qa": QAModel, "choice": ChoiceModel}


def task_model(shape: str, backbone: Backbone, outputs: int) -> TaskModel:
    own = family_of(backbone.config.model).own_classifier
    if own is not None:
        check_fits(backbone.config, shape, False)
        special = special_ids(backbone.tokenizer)
        built: Any = own.build(backbone.config.model, backbone.model, outputs, special)
        return built
    model: TaskModel = MODELS.get(shape, SequenceModel).from_backbone(backbone, outputs)
    return model


def untrained_task_model(
    config: TrainConfig, shape: str, outputs: int, tokenizer: Path
) -> TaskModel:
    """The task model of `config`'s architecture, weights to be loaded (a saved one)."""
    own = family_of(config.model).own_classifier
    if own is not None:
        built: Any = own.build(config.model, build_model(config), outputs, special_ids(tokenizer))
        return built
    m = config.model
    model: TaskModel = MODELS.get(shape, SequenceModel)(m, build_encoder(m), outputs)
    return model


def task_loss(logits: torch.Tensor, labels: torch.Tensor, shape: str) -> torch.Tensor:
    """Cross-entropy (over the labelled pieces for a token task, over the options for
    multiple choice), or mean squared error for regression (transformers' choices)."""
    if shape == "regression":
        return F.mse_loss(logits.squeeze(-1).float(), labels.float())
    if shape == "tokens":
        return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100)
    if shape == "qa":  # BERT: the mean of the start and end cross-entropies
        start = F.cross_entropy(logits[..., 0].float(), labels[:, 0].long())
        end = F.cross_entropy(logits[..., 1].float(), labels[:, 1].long())
        return (start + end) / 2
    return F.cross_entropy(logits.float(), labels.long())
