"""ALBERT (Lan et al. 2020): a factorized embedding and layers shared across depth.

The vocabulary is embedded at a small width E (128) and projected to the hidden width H,
so the embedding costs V x E + E x H instead of V x H. Cross-layer sharing (section 3.1):
`all` (ALBERT's default: one layer applied L times), `attention` (only the attention
blocks shared) or `ffn` (only the feed-forward blocks), or `none`. A shared block is one
module that several layers hold, so it has one set of weights and one gradient.
"""

from __future__ import annotations

from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.models.bert import Encoder, Layer


def shared_layers(config: ModelConfig) -> list[Layer]:
    """`num_layers` layers whose blocks are shared as `config.share` says."""
    if config.share == "all":
        first = Layer(config)
        return [first] * config.num_layers
    layers = [Layer(config) for _ in range(config.num_layers)]
    first = layers[0]
    for layer in layers[1:]:
        if config.share == "attention":
            layer.attention, layer.attention_norm = first.attention, first.attention_norm
        elif config.share == "ffn":
            layer.ffn, layer.ffn_norm = first.ffn, first.ffn_norm
    return layers


def build_encoder(config: ModelConfig) -> Encoder:
    return Encoder(config, layers=shared_layers(config))  # [B, L] -> [B, L, H]
