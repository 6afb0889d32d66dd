"""Model families, one file each: bert, roberta, albert, electra."""

from __future__ import annotations

import torch
from torch import nn

from clozeworks.trainer.config import TrainConfig


def build_model(config: TrainConfig) -> nn.Module:
    """The pretraining model for `config`, initialized from `config.seed` alone."""
    from clozeworks.trainer.models import albert, bert, electra, roberta
    from clozeworks.trainer.objectives import Pretraining

    torch.manual_seed(config.seed)
    model = config.model
    if model.family == "electra":
        return electra.ElectraPretraining(model)
    builders = {
        "bert": bert.build_encoder,
        "roberta": roberta.build_encoder,
        "albert": albert.build_encoder,
    }
    return Pretraining(model, builders[model.family](model), config.objectives)


def num_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
