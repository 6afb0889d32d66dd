"""transformers' names for our tensors: the pieces every family's mapping is made of.

A family's file maps its model to transformers with these (`hf_weights`: {transformers key:
tensor}, views of our parameters where the layouts agree, so copying into them loads our
model; `to_transformers`: the transformers model holding them). Embedding rows are cut back
to the real vocabulary. RoBERTa-style classes number positions from `pad_token_id + 1`, so
their position table gets that many leading rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from clozeworks.schemas.errors import UsageError
from clozeworks.trainer.config import ModelConfig

Tensors = dict[str, torch.Tensor]


def transformers_module() -> Any:
    try:
        import transformers
    except ImportError:
        raise UsageError("export needs transformers: pip install 'clozeworks[export]'") from None
    return transformers


def load(cls: Any, hf_config: Any, weights: Tensors) -> Any:
    """`cls(hf_config)` holding `weights`; RuntimeError if they do not fit it exactly."""
    hf = cls(hf_config)
    missing, unexpected = hf.load_state_dict(weights, strict=False)
    missing = [k for k in missing if not k.endswith("position_ids")]
    if missing or unexpected:
        raise RuntimeError(f"{cls.__name__}: missing {missing}, unexpected {unexpected}")
    return hf.eval()


def common(m: ModelConfig, **kw: Any) -> dict[str, Any]:
    """The config fields every BERT-style transformers config shares, from ours."""
    fields = dict(
        vocab_size=m.vocab_size,
        hidden_size=m.hidden_size,
        num_hidden_layers=m.num_layers,
        num_attention_heads=m.num_heads,
        intermediate_size=m.intermediate_size,
        hidden_act="gelu",
        hidden_dropout_prob=m.dropout,
        attention_probs_dropout_prob=m.attention_dropout,
        max_position_embeddings=m.max_position,
        type_vocab_size=max(1, m.type_vocab_size),
        initializer_range=m.initializer_range,
        layer_norm_eps=m.layer_norm_eps,
        pad_token_id=m.pad_token_id,
    )
    return {**fields, **kw}


def ln(prefix: str, norm: nn.LayerNorm) -> Tensors:
    return {f"{prefix}.weight": norm.weight, f"{prefix}.bias": norm.bias}


def linear(prefix: str, layer: nn.Linear) -> Tensors:
    return {f"{prefix}.weight": layer.weight, f"{prefix}.bias": layer.bias}


def embeddings(prefix: str, encoder: Any, m: ModelConfig, position_offset: int = 0) -> Tensors:
    e = encoder.embeddings
    width = e.word.embedding_dim
    position = e.position.weight
    if position_offset:  # RoBERTa numbers positions from pad_token_id + 1
        position = torch.cat([position.new_zeros(position_offset, width), position])
    token_type = e.token_type.weight if e.token_type is not None else position.new_zeros(1, width)
    return {
        f"{prefix}.word_embeddings.weight": e.word.weight[: m.vocab_size],
        f"{prefix}.position_embeddings.weight": position,
        f"{prefix}.token_type_embeddings.weight": token_type,
        **ln(f"{prefix}.LayerNorm", e.norm),
    }


def qkv(prefix: str, layer: Any, names: tuple[str, str, str]) -> Tensors:
    out: Tensors = {}
    weights = layer.attention.qkv.weight.chunk(3, dim=0)
    biases = layer.attention.qkv.bias.chunk(3, dim=0)
    for name, w, b in zip(names, weights, biases, strict=True):
        out[f"{prefix}.{name}.weight"] = w
        out[f"{prefix}.{name}.bias"] = b
    return out


def bert_layers(prefix: str, encoder: Any) -> Tensors:
    """Post-LN layers in BertLayer naming (BERT, RoBERTa, ELECTRA)."""
    out: Tensors = {}
    for i, layer in enumerate(encoder.layers):
        p = f"{prefix}.layer.{i}"
        out.update(qkv(f"{p}.attention.self", layer, ("query", "key", "value")))
        out.update(linear(f"{p}.attention.output.dense", layer.attention.out))
        out.update(ln(f"{p}.attention.output.LayerNorm", layer.attention_norm))
        out.update(linear(f"{p}.intermediate.dense", layer.ffn.up))
        out.update(linear(f"{p}.output.dense", layer.ffn.down))
        out.update(ln(f"{p}.output.LayerNorm", layer.ffn_norm))
    return out


def mlm_head(prefix: str, head: Any, m: ModelConfig, names: tuple[str, str, str, str]) -> Tensors:
    dense, norm, decoder, bias = names
    word = head.decoder.weight[: m.vocab_size]
    b = head.bias[: m.vocab_size]
    out = {**linear(f"{prefix}.{dense}", head.dense), **ln(f"{prefix}.{norm}", head.norm)}
    out[f"{prefix}.{decoder}.weight"] = word
    out[f"{prefix}.{decoder}.bias"] = b
    out[f"{prefix}.{bias}"] = b
    return out


def roberta_weights(model: Any, m: ModelConfig, prelayernorm: bool) -> Tensors:
    """A RoBERTa-layout MLM model: post-LN RoBERTa, or any pre-LN encoder (BERT's with
    token types too) as `RobertaPreLayerNorm`: pre-LN layers and a final LayerNorm."""
    enc = model.encoder
    offset = m.pad_token_id + 1
    root = "roberta_prelayernorm" if prelayernorm else "roberta"
    weights = {
        **embeddings(f"{root}.embeddings", enc, m, position_offset=offset),
        **mlm_head("lm_head", model.mlm, m, ("dense", "layer_norm", "decoder", "bias")),
    }
    if not prelayernorm:
        weights.update(bert_layers(f"{root}.encoder", enc))
        return weights
    for i, layer in enumerate(enc.layers):
        p = f"{root}.encoder.layer.{i}"
        weights.update(ln(f"{p}.attention.LayerNorm", layer.attention_norm))
        weights.update(qkv(f"{p}.attention.self", layer, ("query", "key", "value")))
        weights.update(linear(f"{p}.attention.output.dense", layer.attention.out))
        weights.update(ln(f"{p}.intermediate.LayerNorm", layer.ffn_norm))
        weights.update(linear(f"{p}.intermediate.dense", layer.ffn.up))
        weights.update(linear(f"{p}.output.dense", layer.ffn.down))
    weights.update(ln(f"{root}.LayerNorm", enc.final_norm))
    return weights


def bert_config(tf: Any, m: ModelConfig, **task: Any) -> Any:
    return tf.BertConfig(**common(m, **task))


def _roberta_fields(m: ModelConfig, **task: Any) -> dict[str, Any]:
    # RoBERTa counts positions from pad_token_id + 1.
    return common(m, max_position_embeddings=m.max_position + m.pad_token_id + 1, **task)


def roberta_config(tf: Any, m: ModelConfig, **task: Any) -> Any:
    return tf.RobertaConfig(**_roberta_fields(m, **task))


def roberta_prelayernorm_config(tf: Any, m: ModelConfig, **task: Any) -> Any:
    return tf.RobertaPreLayerNormConfig(**_roberta_fields(m, **task))


def roberta_model(tf: Any, model: Any, m: ModelConfig, prelayernorm: bool) -> Any:
    weights = roberta_weights(model, m, prelayernorm)
    if not prelayernorm:
        return load(tf.RobertaForMaskedLM, roberta_config(tf, m), weights)
    return load(tf.RobertaPreLayerNormForMaskedLM, roberta_prelayernorm_config(tf, m), weights)


@dataclass(frozen=True)
class Layout:
    """How transformers lays out a BERT-style encoder family, for a fine-tuned model:
    its class names (`{name}ForSequenceClassification`), the encoder's tensor prefix, and
    the sequence head: BERT's pooler (dense + tanh, the tensors named `pooler`) +
    `classifier` when there is one, else RoBERTa's `classifier.dense` +
    `classifier.out_proj` with `activation` between. The multiple-choice head is a dense
    layer + `activation` on the first token (`summary`: its tensors), dropout, and
    `classifier` to one score."""

    name: str
    root: str
    pooler: str | None
    # (transformers, our model config, a task's fields) -> the transformers config: the
    # family's own maker, the one its pretraining export uses.
    make_config: Callable[..., Any] = bert_config
    activation: str = "tanh"
    exportable: bool = True  # transformers has no pre-LN ALBERT or ELECTRA
    # `...ForMultipleChoice`'s dense layer: the pooler of the encoder where the family's
    # model has one (RoBERTa's too, though its sequence head does not use it).
    summary: str | None = None

    @property
    def choice_summary(self) -> str:
        return self.summary or self.pooler or f"{self.root}.pooler.dense"

    def config(self, tf: Any, m: ModelConfig, **task: Any) -> Any:
        """The transformers config of an encoder `m` of this layout with a task's fields."""
        return self.make_config(tf, m, **task)

    @property
    def pooled(self) -> bool:
        return self.pooler is not None


PRE_LN = Layout(
    "RobertaPreLayerNorm",
    "roberta_prelayernorm",
    pooler=None,
    make_config=roberta_prelayernorm_config,
)
