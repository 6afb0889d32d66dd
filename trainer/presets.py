"""Named model sizes (`--preset`), each a family's architecture at one of its papers' sizes,
trained with that family's optimizer, objectives and masking (trainer/families.py).

Sizes are the BERT paper's (Devlin et al. 2019; the small sizes from Turc et al. 2019's
"Well-Read Students" table): the feed-forward width is always 4 x hidden. ALBERT's from Lan
et al. 2020 (table 1), ELECTRA's from Clark et al. 2020 (table 6), GPT-2's, T5 v1.1's,
XLNet-Base's and BART's from their papers.
"""

from __future__ import annotations

from typing import Any

from clozeworks.schemas.errors import UsageError
from clozeworks.trainer.config import ModelConfig, TrainConfig
from clozeworks.trainer.families import family_of


def _bert(layers: int, hidden: int, heads: int, **kw: Any) -> ModelConfig:
    return ModelConfig(
        num_layers=layers,
        hidden_size=hidden,
        num_heads=heads,
        intermediate_size=4 * hidden,
        **kw,
    )


MODEL_PRESETS: dict[str, ModelConfig] = {
    "bert-tiny": _bert(2, 128, 2),
    "bert-mini": _bert(4, 256, 4),
    "bert-small": _bert(4, 512, 8),
    "bert-medium": _bert(8, 512, 8),
    "bert-base": _bert(12, 768, 12),
    "bert-large": _bert(24, 1024, 16),
    "roberta-base": _bert(12, 768, 12, family="roberta", type_vocab_size=0),
    "roberta-large": _bert(24, 1024, 16, family="roberta", type_vocab_size=0),
    "albert-base": _bert(12, 768, 12, family="albert", embedding_size=128, share="all"),
    "albert-large": _bert(24, 1024, 16, family="albert", embedding_size=128, share="all"),
    "electra-small": _bert(
        12, 256, 4, family="electra", embedding_size=128, generator_fraction=0.25
    ),
    "electra-base": _bert(
        12, 768, 12, family="electra", embedding_size=768, generator_fraction=1 / 3
    ),
    # Half of BERT-base's depth, its width (Sanh et al. 2019).
    "distilbert-base": _bert(6, 768, 12, family="distilbert", type_vocab_size=0),
}


def _gpt2(layers: int, hidden: int, heads: int) -> ModelConfig:
    """GPT-2's layout (Radford et al. 2019, section 2.3): pre-LN with a final LayerNorm,
    1024 learned positions, no token types, no dropout change from GPT's 0.1."""
    return _bert(
        layers,
        hidden,
        heads,
        family="gpt",
        type_vocab_size=0,
        max_position=1024,
        layer_norm_eps=1e-5,
        pre_ln=True,
    )


def _t5(layers: int, hidden: int, heads: int, ff: int) -> ModelConfig:
    """T5 v1.1 (gated-GELU feed-forward of width `ff`, heads of 64, RMS norm, no biases,
    untied output layer; no dropout in pretraining, as the v1.1 release notes say)."""
    return ModelConfig(
        family="t5",
        num_layers=layers,
        hidden_size=hidden,
        num_heads=heads,
        head_size=64,
        intermediate_size=ff,
        type_vocab_size=0,
        dropout=0.0,
        attention_dropout=0.0,
        layer_norm_eps=1e-6,
        initializer_range=1.0,  # T5's initializer_factor: widths scale the rest
    )


def _bart(layers: int, hidden: int, heads: int) -> ModelConfig:
    """BART (Lewis et al. 2020, section 2.1): `layers` in the encoder and as many in the
    decoder, GELU, 1024 learned positions, LayerNorm eps 1e-5, attention dropout 0.1 as
    fairseq's bart.base / bart.large."""
    return _bert(
        layers,
        hidden,
        heads,
        family="bart",
        type_vocab_size=0,
        max_position=1024,
        layer_norm_eps=1e-5,
        decoder_layers=layers,
    )


MODEL_PRESETS.update(
    {
        "bart-base": _bart(6, 768, 12),
        "bart-large": _bart(12, 1024, 16),
        "gpt2-small": _gpt2(12, 768, 12),
        "t5-small": _t5(8, 512, 6, 1024),
        "t5-base": _t5(12, 768, 12, 2048),
        # XLNet-Base: BERT-Base's sizes, no absolute positions, LayerNorm eps 1e-12.
        "xlnet-base": _bert(12, 768, 12, family="xlnet", type_vocab_size=0),
    }
)


def preset(name: str) -> TrainConfig:
    """The TrainConfig of preset `name`: its sizes, and its family's optimizer, objectives
    (MLM alone for BERT, RoBERTa and ALBERT; pair shards add the sentence objective) and
    masking. UsageError listing the presets otherwise."""
    if name not in MODEL_PRESETS:
        raise UsageError(f"unknown preset {name!r}; choose from {', '.join(MODEL_PRESETS)}")
    model = MODEL_PRESETS[name]
    family = family_of(model)
    return TrainConfig(
        model=model, optim=family.optim, objectives=family.objectives, masking=family.masking
    )
