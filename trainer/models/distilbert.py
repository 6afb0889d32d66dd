"""DistilBERT (Sanh et al. 2019): BERT's encoder at half the depth, without token-type
embeddings or the pooler, trained by distillation from a BERT teacher (trainer/distill)
or, as any encoder, with MLM alone.

The network is BERT's post-LN encoder with `type_vocab_size` 0 and learned positions
(DistilBERT's `sinusoidal_pos_embds` is off by default); transformers names its tensors
differently: `DistilBertForMaskedLM` (`distilbert.transformer.layer.N.attention.q_lin`,
`sa_layer_norm`, `ffn.lin1`, `output_layer_norm`; the MLM head `vocab_transform`,
`vocab_layer_norm`, `vocab_projector`). Its config names the sizes `dim`, `n_layers`,
`n_heads` and `hidden_dim`. The sequence head is `pre_classifier` + ReLU, dropout,
`classifier`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from clozeworks.schemas.errors import UsageError
from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.models import hf
from clozeworks.trainer.models.bert import Encoder

# transformers' DistilBertConfig names for the BERT config fields init_from reads.
CONFIG_NAMES = {
    "hidden_size": "dim",
    "num_hidden_layers": "n_layers",
    "num_attention_heads": "n_heads",
    "intermediate_size": "hidden_dim",
}


def build_encoder(config: ModelConfig) -> Encoder:
    return Encoder(replace(config, type_vocab_size=0))  # [B, L] -> [B, L, H]


def _encoder_weights(encoder: Any, m: ModelConfig) -> hf.Tensors:
    e = encoder.embeddings
    out = {
        "distilbert.embeddings.word_embeddings.weight": e.word.weight[: m.vocab_size],
        "distilbert.embeddings.position_embeddings.weight": e.position.weight,
        **hf.ln("distilbert.embeddings.LayerNorm", e.norm),
    }
    for i, layer in enumerate(encoder.layers):
        p = f"distilbert.transformer.layer.{i}"
        out.update(hf.qkv(f"{p}.attention", layer, ("q_lin", "k_lin", "v_lin")))
        out.update(hf.linear(f"{p}.attention.out_lin", layer.attention.out))
        out.update(hf.ln(f"{p}.sa_layer_norm", layer.attention_norm))
        out.update(hf.linear(f"{p}.ffn.lin1", layer.ffn.up))
        out.update(hf.linear(f"{p}.ffn.lin2", layer.ffn.down))
        out.update(hf.ln(f"{p}.output_layer_norm", layer.ffn_norm))
    return out


def _weights(model: Any, m: ModelConfig) -> hf.Tensors:
    head = model.mlm
    return {
        **_encoder_weights(model.encoder, m),
        **hf.linear("vocab_transform", head.dense),
        **hf.ln("vocab_layer_norm", head.norm),
        "vocab_projector.weight": head.decoder.weight[: m.vocab_size],
        "vocab_projector.bias": head.bias[: m.vocab_size],
    }


def _config(tf: Any, m: ModelConfig, **task: Any) -> Any:
    if m.pre_ln or m.embedding_width != m.hidden_size or m.layer_norm_eps != 1e-12:
        raise UsageError(
            "transformers' DistilBERT is post-LN, without factorized embeddings, with "
            "LayerNorm eps 1e-12; this model cannot be exported as one"
        )
    return tf.DistilBertConfig(
        vocab_size=m.vocab_size,
        dim=m.hidden_size,
        n_layers=m.num_layers,
        n_heads=m.num_heads,
        hidden_dim=m.intermediate_size,
        dropout=m.dropout,
        attention_dropout=m.attention_dropout,
        max_position_embeddings=m.max_position,
        initializer_range=m.initializer_range,
        pad_token_id=m.pad_token_id,
        activation="gelu",
        sinusoidal_pos_embds=False,
        **task,
    )


def hf_weights(model: Any, m: ModelConfig) -> list[tuple[str, hf.Tensors]]:
    return [("", _weights(model, m))]


def to_transformers(tf: Any, model: Any, m: ModelConfig, special: dict[str, int]) -> list[Any]:
    return [("", hf.load(tf.DistilBertForMaskedLM, _config(tf, m), _weights(model, m)))]


def layout(m: ModelConfig) -> hf.Layout:
    return hf.Layout(
        "DistilBert",
        "distilbert",
        pooler="pre_classifier",
        make_config=_config,
        activation="relu",
        exportable=not m.pre_ln,
    )


def from_transformers(config: dict[str, Any], arch: ModelConfig, path: Any) -> ModelConfig:
    if config.get("sinusoidal_pos_embds"):
        raise UsageError(f"{path}: sinusoidal positions; only learned ones are read")
    return replace(arch, type_vocab_size=0)
