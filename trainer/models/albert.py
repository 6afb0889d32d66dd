"""ALBERT (Lan et al. 2020): a factorized embedding and layers shared across depth.

The vocabulary is embedded at a small width E (128) and projected to the hidden width H,
so the embedding costs V x E + E x H instead of V x H. Cross-layer sharing (section 3.1):
`all` (ALBERT's default: one layer applied L times), `attention` (only the attention
blocks shared) or `ffn` (only the feed-forward blocks), or `none`. A shared block is one
module that several layers hold, so it has one set of weights and one gradient.

transformers: `AlbertForPreTraining` with a sentence head (2 or 3 labels), else
`AlbertForMaskedLM`; it shares whole layers or none, so `attention` and `ffn` sharing
export as one group per layer with the shared blocks copied into each.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.models import hf
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


def _groups(model: Any, m: ModelConfig) -> list[Any]:
    # One group when every layer is one module; otherwise a group per layer, shared
    # blocks copied into each (transformers cannot share only attention or only FFN).
    return [model.encoder.layers[0]] if m.share == "all" else list(model.encoder.layers)


def _weights(model: Any, m: ModelConfig) -> hf.Tensors:
    enc = model.encoder
    weights = hf.embeddings("albert.embeddings", enc, m)
    if enc.project is not None:
        weights.update(hf.linear("albert.encoder.embedding_hidden_mapping_in", enc.project))
    else:
        eye = torch.eye(m.hidden_size)
        weights["albert.encoder.embedding_hidden_mapping_in.weight"] = eye
        weights["albert.encoder.embedding_hidden_mapping_in.bias"] = torch.zeros(m.hidden_size)
    for g, layer in enumerate(_groups(model, m)):
        p = f"albert.encoder.albert_layer_groups.{g}.albert_layers.0"
        weights.update(hf.qkv(f"{p}.attention", layer, ("query", "key", "value")))
        weights.update(hf.linear(f"{p}.attention.dense", layer.attention.out))
        weights.update(hf.ln(f"{p}.attention.LayerNorm", layer.attention_norm))
        weights.update(hf.linear(f"{p}.ffn", layer.ffn.up))
        weights.update(hf.linear(f"{p}.ffn_output", layer.ffn.down))
        weights.update(hf.ln(f"{p}.full_layer_layer_norm", layer.ffn_norm))
    weights.update(
        hf.mlm_head("predictions", model.mlm, m, ("dense", "LayerNorm", "decoder", "bias"))
    )
    sentence = model.sentence
    if sentence is not None:
        weights.update(hf.linear("albert.pooler", sentence.pooler))
        weights.update(hf.linear("sop_classifier.classifier", sentence.classifier))
    return weights


def hf_weights(model: Any, m: ModelConfig) -> list[tuple[str, hf.Tensors]]:
    return [("", _weights(model, m))]


def to_transformers(tf: Any, model: Any, m: ModelConfig, special: dict[str, int]) -> list[Any]:
    if m.pre_ln:
        raise UsageError("transformers has no pre-LN ALBERT; train with pre_ln = false")
    weights = _weights(model, m)
    sentence = model.sentence
    if sentence is None:
        return [("", hf.load(tf.AlbertForMaskedLM, hf_config(tf, m), weights))]
    config = hf_config(tf, m, num_labels=sentence.classifier.out_features)
    return [("", hf.load(tf.AlbertForPreTraining, config, weights))]


def hf_config(tf: Any, m: ModelConfig, **task: Any) -> Any:
    """transformers' AlbertConfig of `m`: one group when every layer is shared, else one per
    layer (`_groups`), a layer per group."""
    groups = 1 if m.share == "all" else m.num_layers
    kw = hf.common(m, embedding_size=m.embedding_width, num_hidden_groups=groups, **task)
    return tf.AlbertConfig(inner_group_num=1, **kw)


def _task_config(tf: Any, m: ModelConfig, **task: Any) -> Any:
    # transformers' ALBERT classifier has a dropout of its own; a fine-tuned one uses ours.
    return hf_config(tf, m, classifier_dropout_prob=m.dropout, **task)


def layout(m: ModelConfig) -> hf.Layout:
    return hf.Layout(
        "Albert",
        "albert",
        pooler="albert.pooler",
        make_config=_task_config,
        exportable=not m.pre_ln,
    )


def from_transformers(config: dict[str, Any], arch: ModelConfig, path: Any) -> ModelConfig:
    groups, layers = config.get("num_hidden_groups", 1), config["num_hidden_layers"]
    if config.get("inner_group_num", 1) != 1 or groups not in (1, layers):
        raise BadInputError(
            f"{path}: ALBERT with {groups} groups of {config.get('inner_group_num')} "
            "layers; this trainer shares all layers (1 group) or none (1 per layer)"
        )
    share = "all" if groups == 1 else "none"
    return replace(arch, embedding_size=config.get("embedding_size"), share=share)
