"""Model families, one file each: bert, roberta, albert, electra, gpt, t5, xlnet."""

from __future__ import annotations

import torch
from torch import nn

from clozeworks.schemas.errors import UsageError
from clozeworks.trainer.config import GENERATIVE, ModelConfig, TrainConfig
from clozeworks.trainer.models.bert import Encoder


def build_encoder(config: ModelConfig) -> Encoder:
    """The encoder alone of `config.family` (ELECTRA's: its discriminator's), untrained.
    gpt, t5 and xlnet have no BERT-style encoder to fine-tune."""
    if config.family in GENERATIVE:
        raise UsageError(
            f"a {config.family} model has no BERT-style encoder; fine-tuning takes bert, "
            "roberta, albert or electra"
        )
    from clozeworks.trainer.models import albert, bert, roberta

    builders = {"roberta": roberta.build_encoder, "albert": albert.build_encoder}
    return builders.get(config.family, bert.build_encoder)(config)


def build_model(config: TrainConfig) -> nn.Module:
    """The pretraining model for `config`, initialized from `config.seed` alone."""
    from clozeworks.trainer.models import electra, gpt, t5, xlnet
    from clozeworks.trainer.objectives import Pretraining

    torch.manual_seed(config.seed)
    model = config.model
    if model.family == "electra":
        return electra.ElectraPretraining(model)
    if model.family == "gpt":
        return gpt.GPT(model)
    if model.family == "t5":
        return t5.T5(model)
    if model.family == "xlnet":
        return xlnet.XLNet(model)
    return Pretraining(model, build_encoder(model), config.objectives)


def num_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
