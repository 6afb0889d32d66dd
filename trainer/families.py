"""Model families, one entry each: everything the trainer, the export, `--init-from` and
fine-tuning need to know about a family, in one place.

A family is a model file in trainer/models/ (the network, and its mapping to and from
transformers: `hf_weights`, `to_transformers`, `from_transformers`, `layout`) plus one
`Family` entry below; nothing else asks which family a model is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.schemas.kinds import FAMILIES as NAMES
from clozeworks.schemas.kinds import SENTENCE_OBJECTIVES, FamilyName, Objective
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.config import ModelConfig, OptimConfig, TrainConfig
from clozeworks.trainer.data.objective_specs import ENCODER_HEADS
from clozeworks.trainer.data.permutation import XLNET_MASKING
from clozeworks.trainer.models import (
    albert,
    bart,
    bert,
    distilbert,
    electra,
    gpt,
    hf,
    roberta,
    t5,
    xlnet,
)
from clozeworks.trainer.models.bert import Encoder
from clozeworks.trainer.pretraining import Pretraining

EncoderBuilder = Callable[[ModelConfig], Encoder]


@dataclass(frozen=True)
class OwnClassifier:
    """A family's own sequence classifier, where it has no BERT-style encoder for ours
    (BART's: the decoder's state at the last `</s>`)."""

    # (its config, the pretraining model, outputs, the tokenizer's special ids) -> model
    build: Callable[[ModelConfig, nn.Module, int, dict[str, int]], nn.Module]
    # (transformers, the model, num_labels / id2label / ... for its config) -> theirs
    to_transformers: Callable[[Any, Any, dict[str, Any]], Any]


@dataclass(frozen=True)
class Family:
    name: FamilyName
    # The pretraining model (heads included) for a run's config.
    build: Callable[[TrainConfig], nn.Module]
    # The encoder a fine-tuned model starts from; None: no BERT-style encoder (GPT, T5 and
    # XLNet are not fine-tuned here; BART with its own classifier, below).
    encoder: EncoderBuilder | None
    # What a run of this family trains unless told otherwise; BERT and ALBERT add their
    # sentence objective on pair shards (objectives.with_pair_objective).
    objectives: tuple[Objective, ...]
    # Every objective it can train; `exact`: exactly `objectives`, no more, no fewer.
    trains: frozenset[Objective]
    exact: bool
    # Its paper's optimizer and masking (a preset's, `--optim FAMILY`).
    optim: OptimConfig
    masking: MaskingSettings
    # transformers: {key: tensor} per subdirectory, and the models holding them.
    hf_weights: Callable[[nn.Module, ModelConfig], list[tuple[str, hf.Tensors]]]
    to_transformers: Callable[[Any, nn.Module, ModelConfig, dict[str, int]], list[Any]]
    # transformers' `model_type`s it reads (`--init-from`, `cloze finetune`), the
    # architecture from their config, and the class whose head is its sentence objective.
    model_types: tuple[str, ...] = ()
    from_transformers: Callable[[dict[str, Any], ModelConfig, Path], ModelConfig] | None = None
    sentence_head: tuple[str, Objective] | None = None
    # The fine-tuning layout (trainer/finetune): its classes and sequence head.
    layout: Callable[[ModelConfig], hf.Layout] | None = None
    # Where its transformers config names BERT's size fields otherwise ({BERT's: its}).
    config_names: dict[str, str] = field(default_factory=dict)
    # Sequence tasks (single, pair, regression) fine-tuned with the family's own head.
    own_classifier: OwnClassifier | None = None

    @property
    def sentence(self) -> bool:
        """Whether it trains a sentence objective (nsp, sop, sso) on pair shards."""
        return any(o in self.trains for o in SENTENCE_OBJECTIVES)

    @property
    def running_text(self) -> bool:
        """Whether it trains its own objective alone on unmasked packed text."""
        return self.encoder is None


def _pretraining(encoder: EncoderBuilder) -> Callable[[TrainConfig], nn.Module]:
    def build(config: TrainConfig) -> nn.Module:
        return Pretraining(config.model, encoder(config.model), config.objectives)

    return build


# What Pretraining trains: every objective with a head part, sentence ones where a family
# has pairs.
_WITH_SENTENCES: frozenset[Objective] = frozenset(ENCODER_HEADS)  # type: ignore[arg-type]
_ENCODER_HEADS = _WITH_SENTENCES - frozenset(SENTENCE_OBJECTIVES)

FAMILIES: dict[str, Family] = {
    "bert": Family(
        name="bert",
        build=_pretraining(bert.build_encoder),
        encoder=bert.build_encoder,
        objectives=("mlm",),
        trains=_WITH_SENTENCES,
        exact=False,
        # Adam 1e-4, beta2 0.999, weight decay 0.01, 10k warm-up (section A.2).
        optim=OptimConfig(),
        masking=MaskingSettings(),
        hf_weights=bert.hf_weights,
        to_transformers=bert.to_transformers,
        model_types=("bert",),
        from_transformers=bert.from_transformers,
        sentence_head=("BertForPreTraining", "nsp"),
        layout=bert.layout,
    ),
    "roberta": Family(
        name="roberta",
        build=_pretraining(roberta.build_encoder),
        encoder=roberta.build_encoder,
        objectives=("mlm",),
        trains=_ENCODER_HEADS,
        exact=False,
        # beta2 0.98 for stability with large batches, eps 1e-6, 24k warm-up, peak 6e-4.
        optim=OptimConfig(lr=6e-4, beta2=0.98, eps=1e-6, warmup_steps=24_000),
        masking=MaskingSettings(),
        hf_weights=roberta.hf_weights,
        to_transformers=roberta.to_transformers,
        model_types=("roberta",),
        from_transformers=roberta.from_transformers,
        layout=roberta.layout,
    ),
    "albert": Family(
        name="albert",
        build=_pretraining(albert.build_encoder),
        encoder=albert.build_encoder,
        objectives=("mlm",),
        trains=_WITH_SENTENCES,
        exact=False,
        # LAMB at 0.00176 for batch 4096, 3125 warm-up steps (section 4.1).
        optim=OptimConfig(name="lamb", lr=0.00176, warmup_steps=3125, eps=1e-6),
        masking=MaskingSettings(),
        hf_weights=albert.hf_weights,
        to_transformers=albert.to_transformers,
        model_types=("albert",),
        from_transformers=albert.from_transformers,
        sentence_head=("AlbertForPreTraining", "sop"),
        layout=albert.layout,
    ),
    "electra": Family(
        name="electra",
        build=lambda config: electra.ElectraPretraining(config.model),
        encoder=bert.build_encoder,
        objectives=("mlm", "rtd"),
        trains=frozenset(("mlm", "rtd")),
        exact=True,
        # ELECTRA-small: 5e-4, 10k warm-up (table 6; base uses 2e-4).
        optim=OptimConfig(lr=5e-4, warmup_steps=10_000),
        # 15% masked, 85% of them [MASK] and the rest kept: no random replacement, the
        # generator supplies the replacements.
        masking=MaskingSettings(mask_ratio=0.85, random_ratio=0.0),
        hf_weights=electra.hf_weights,
        to_transformers=electra.to_transformers,
        model_types=("electra",),
        from_transformers=electra.from_transformers,
        layout=electra.layout,
    ),
    "distilbert": Family(
        name="distilbert",
        build=_pretraining(distilbert.build_encoder),
        encoder=distilbert.build_encoder,
        objectives=("mlm",),
        # No sentence objective: DistilBERT dropped NSP (section 3); distilled with a
        # teacher (kd, cos; TinyBERT's att, hid), or MLM alone.
        trains=frozenset(("mlm", "kd", "cos", "att", "hid")),
        exact=False,
        # The released distillation command: Adam 5e-4, eps 1e-6, no weight decay,
        # warm-up over 5% of the steps, gradients clipped at 5.
        optim=OptimConfig(lr=5e-4, eps=1e-6, weight_decay=0.0, warmup_ratio=0.05, grad_clip=5.0),
        masking=MaskingSettings(),
        hf_weights=distilbert.hf_weights,
        to_transformers=distilbert.to_transformers,
        model_types=("distilbert",),
        from_transformers=distilbert.from_transformers,
        layout=distilbert.layout,
        config_names=distilbert.CONFIG_NAMES,
    ),
    "gpt": Family(
        name="gpt",
        build=lambda config: gpt.GPT(config.model),
        encoder=None,
        objectives=("clm",),
        trains=frozenset(("clm",)),
        exact=True,
        # GPT (Radford et al. 2018, section 4.1): Adam at 2.5e-4 warmed up over 2000 steps
        # (GPT-2 tuned the rate per size and did not publish it), weight decay 0.01.
        optim=OptimConfig(lr=2.5e-4, beta2=0.999, eps=1e-8, warmup_steps=2000),
        masking=MaskingSettings(),
        hf_weights=gpt.hf_weights,
        to_transformers=gpt.to_transformers,
    ),
    "t5": Family(
        name="t5",
        build=lambda config: t5.T5(config.model),
        encoder=None,
        objectives=("t5",),
        trains=frozenset(("t5",)),
        exact=True,
        # T5 pretrained with Adafactor at 0.01 after 10k warm-up steps (section 3.1.2); with
        # AdamW, 1e-3 is the rate transformers' T5 examples use.
        optim=OptimConfig(lr=1e-3, eps=1e-8, weight_decay=0.0, warmup_steps=10_000),
        masking=MaskingSettings(),
        hf_weights=t5.hf_weights,
        to_transformers=t5.to_transformers,
    ),
    "xlnet": Family(
        name="xlnet",
        build=lambda config: xlnet.XLNet(config.model),
        encoder=None,
        objectives=("plm",),
        trains=frozenset(("plm",)),
        exact=True,
        # XLNet-Large (Yang et al. 2019, table 7): Adam 4e-4, eps 1e-6, 40k warm-up, linear
        # decay, weight decay 0.01.
        optim=OptimConfig(lr=4e-4, eps=1e-6, warmup_steps=40_000),
        # 1/K of the tokens (K = 6) as whole-word n-grams (its data_utils._sample_mask).
        masking=XLNET_MASKING,
        hf_weights=xlnet.hf_weights,
        to_transformers=xlnet.to_transformers,
    ),
    "bart": Family(
        name="bart",
        build=lambda config: bart.BART(config.model),
        encoder=None,
        objectives=("bart",),
        trains=frozenset(("bart",)),
        exact=True,
        # BART-large follows RoBERTa-large's pretraining (Lewis et al. 2020, section 5.1):
        # Adam at 4e-4, beta2 0.98, eps 1e-6, 30k warm-up, weight decay 0.01.
        optim=OptimConfig(lr=4e-4, beta2=0.98, eps=1e-6, warmup_steps=30_000),
        masking=MaskingSettings(),
        hf_weights=bart.hf_weights,
        to_transformers=bart.to_transformers,
        own_classifier=OwnClassifier(bart.sequence_model, bart.sequence_to_transformers),
    ),
}
assert tuple(FAMILIES) == NAMES, "every family in schemas.kinds has one entry"
# The prefixes transformers' head classes put before an encoder's tensors (`bert.`, ...).
TRANSFORMERS_ROOTS = frozenset(
    family.layout(replace(ModelConfig(), pre_ln=pre_ln)).root
    for family in FAMILIES.values()
    if family.layout is not None
    for pre_ln in (False, True)
)


def family_of(model: ModelConfig) -> Family:
    return FAMILIES[model.family]


def build_model(config: TrainConfig) -> nn.Module:
    """The pretraining model for `config`, initialized from `config.seed` alone."""
    torch.manual_seed(config.seed)
    return family_of(config.model).build(config)


# A model described past this is refused before any memory is taken (an edited config.json
# with hidden_size 1000000, a manifest's vocabulary): ten times the largest model of the
# papers here (T5-11B's 11 billion).
MAX_PARAMETERS = 110_000_000_000


def described_model(config: TrainConfig, source: str) -> nn.Module:
    """The model `config` describes, on the meta device (its shapes, no memory);
    BadInputError naming `source` when it has more than MAX_PARAMETERS parameters."""
    # build_model seeds the generator: the caller's state is kept.
    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        model = build_model(config)
    parameters = sum(p.numel() for p in model.parameters())
    if parameters > MAX_PARAMETERS:
        m = config.model
        raise BadInputError(
            f"{source}: describes a model of {parameters:,} parameters (hidden_size "
            f"{m.hidden_size}, num_layers {m.num_layers}, vocab_size {m.vocab_size}), past the "
            f"{MAX_PARAMETERS:,} a run here can have"
        )
    return model


def build_encoder(config: ModelConfig) -> Encoder:
    """The encoder alone of `config.family` (ELECTRA's: its discriminator's), untrained;
    UsageError for a family with no BERT-style encoder to fine-tune."""
    encoder = family_of(config).encoder
    if encoder is None:
        fine = " or ".join(n for n, f in FAMILIES.items() if f.encoder is not None)
        raise UsageError(
            f"a {config.family} model has no BERT-style encoder; fine-tuning takes {fine}"
        )
    return encoder(config)


def to_transformers(
    model: nn.Module, config: TrainConfig, special: dict[str, int] | None = None
) -> list[tuple[str, Any]]:
    """(subdirectory, transformers model) pairs holding `model`'s weights. `special`: the
    tokenizer's special ids by role, for the generative families' bos / eos."""
    tf = hf.transformers_module()
    return family_of(config.model).to_transformers(tf, model, config.model, special or {})


def hf_weights(model: nn.Module, config: TrainConfig) -> list[tuple[str, hf.Tensors]]:
    """(subdirectory, {transformers key: tensor}) as `to_transformers` writes them. Most
    tensors are views of the model's parameters (so copying into them loads the model);
    the rest are derived (RoBERTa's offset positions, absent token types, an identity
    projection), which `trainer.init_from` handles by name."""
    return family_of(config.model).hf_weights(model, config.model)


def transformers_family(config: dict[str, Any], path: Path) -> tuple[Family, bool]:
    """(family, pre-LN) of a transformers config; BadInputError for one no family reads."""
    kind = config.get("model_type")
    if kind == "roberta-prelayernorm":
        # Our pre-LN BERT exports here too; it is the one with token types.
        name = "bert" if config.get("type_vocab_size", 1) > 1 else "roberta"
        return FAMILIES[name], True
    for family in FAMILIES.values():
        if kind in family.model_types:
            return family, False
    known = sorted({t for f in FAMILIES.values() for t in f.model_types} | {"roberta-prelayernorm"})
    raise BadInputError(f"{path}: model_type {kind!r}; --init-from reads {', '.join(known)}")


def transformers_objectives(family: Family, config: dict[str, Any]) -> tuple[Objective, ...]:
    """What a transformers checkpoint of `family` was pretrained with, as far as its heads
    say: the family's own objectives, or MLM plus the sentence objective its
    `...ForPreTraining` class carries."""
    if family.exact:
        return family.objectives
    classes = config.get("architectures") or []
    if family.sentence_head is not None and family.sentence_head[0] in classes:
        return ("mlm", family.sentence_head[1])
    return ("mlm",)


def num_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
