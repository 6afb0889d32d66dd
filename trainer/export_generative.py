"""GPT, T5 and XLNet runs as transformers models: `GPT2LMHeadModel`,
`T5ForConditionalGeneration`, `XLNetLMHeadModel`.

Both keep our weights unchanged but for layout: GPT-2's `Conv1D` stores [in, out], so
linear weights go over transposed (views, so copying into them loads our model), and the
padded embedding rows are cut back to the vocabulary. Special ids come from the run's
tokenizer: GPT-2's bos / eos are its `[CLS]` / `[SEP]` (`<s>` / `</s>`), T5's eos is its
`[SEP]` and its decoder starts from the pad id.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from clozeworks.trainer.config import ModelConfig

Tensors = dict[str, torch.Tensor]


def gpt_config(tf: Any, m: ModelConfig, special: dict[str, int]) -> Any:
    return tf.GPT2Config(
        vocab_size=m.vocab_size,
        n_positions=m.max_position,
        n_embd=m.hidden_size,
        n_layer=m.num_layers,
        n_head=m.num_heads,
        n_inner=m.intermediate_size,
        activation_function="gelu_new",
        resid_pdrop=m.dropout,
        embd_pdrop=m.dropout,
        attn_pdrop=m.attention_dropout,
        layer_norm_epsilon=m.layer_norm_eps,
        initializer_range=m.initializer_range,
        bos_token_id=special.get("cls"),
        eos_token_id=special.get("sep"),
        pad_token_id=special.get("pad", m.pad_token_id),
        tie_word_embeddings=True,
    )


def gpt_weights(model: Any, m: ModelConfig) -> Tensors:
    out: Tensors = {
        "transformer.wte.weight": model.wte.weight[: m.vocab_size],
        "transformer.wpe.weight": model.wpe.weight,
        "transformer.ln_f.weight": model.ln_f.weight,
        "transformer.ln_f.bias": model.ln_f.bias,
        "lm_head.weight": model.wte.weight[: m.vocab_size],
    }
    for i, block in enumerate(model.blocks):
        p = f"transformer.h.{i}"
        pairs: list[tuple[str, nn.Module]] = [
            ("ln_1", block.ln_1),
            ("ln_2", block.ln_2),
            ("attn.c_attn", block.attn.qkv),
            ("attn.c_proj", block.attn.proj),
            ("mlp.c_fc", block.fc),
            ("mlp.c_proj", block.fc_proj),
        ]
        for name, module in pairs:
            linear = isinstance(module, nn.Linear)
            out[f"{p}.{name}.weight"] = module.weight.t() if linear else module.weight
            out[f"{p}.{name}.bias"] = module.bias
    return out


def t5_config(tf: Any, m: ModelConfig, special: dict[str, int]) -> Any:
    pad = special.get("pad", m.pad_token_id)
    return tf.T5Config(
        vocab_size=m.vocab_size,
        d_model=m.hidden_size,
        d_kv=m.head_width,
        d_ff=m.intermediate_size,
        num_layers=m.num_layers,
        num_decoder_layers=m.decoder_depth,
        num_heads=m.num_heads,
        relative_attention_num_buckets=m.relative_buckets,
        relative_attention_max_distance=m.relative_max_distance,
        dropout_rate=m.dropout,
        layer_norm_epsilon=m.layer_norm_eps,
        initializer_factor=m.initializer_range,
        feed_forward_proj="gated-gelu",
        tie_word_embeddings=False,
        pad_token_id=pad,
        eos_token_id=special.get("sep"),
        decoder_start_token_id=pad,
    )


def t5_model(tf: Any, m: ModelConfig, special: dict[str, int], weights: Tensors, load: Any) -> Any:
    """`T5ForConditionalGeneration` with our weights. transformers 5 ties T5's output layer
    to the embedding whatever the config says (and reads `tie_word_embeddings = false` as
    "v1.1: do not scale the decoder output"); a v1.1 output layer of its own is kept when
    the checkpoint's two differ, so it is untied here before loading, and the saved
    config says false so that a reload does not scale."""

    class Untied(tf.T5ForConditionalGeneration):  # type: ignore[misc, name-defined]
        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self.lm_head.weight = nn.Parameter(self.lm_head.weight.detach().clone())

    hf = load(Untied, t5_config(tf, m, special), weights)
    hf.__class__ = tf.T5ForConditionalGeneration  # saved and loaded as the stock class
    hf.config.tie_word_embeddings = False
    return hf


def _attention(prefix: str, attention: Any) -> Tensors:
    out = {f"{prefix}.{n}.weight": getattr(attention, n).weight for n in ("q", "k", "v", "o")}
    if attention.relative_attention_bias is not None:
        out[f"{prefix}.relative_attention_bias.weight"] = attention.relative_attention_bias.weight
    return out


def t5_weights(model: Any, m: ModelConfig) -> Tensors:
    shared = model.shared.weight[: m.vocab_size]
    out: Tensors = {
        "shared.weight": shared,
        "encoder.embed_tokens.weight": shared,
        "decoder.embed_tokens.weight": shared,
        "lm_head.weight": model.lm_head.weight[: m.vocab_size],
    }
    for side in ("encoder", "decoder"):
        stack = getattr(model, side)
        out[f"{side}.final_layer_norm.weight"] = stack.final_norm.weight
        for i, block in enumerate(stack.blocks):
            p = f"{side}.block.{i}.layer"
            out.update(_attention(f"{p}.0.SelfAttention", block.self_attention))
            out[f"{p}.0.layer_norm.weight"] = block.self_norm.weight
            ff = 1
            if block.cross_attention is not None:
                out.update(_attention(f"{p}.1.EncDecAttention", block.cross_attention))
                out[f"{p}.1.layer_norm.weight"] = block.cross_norm.weight
                ff = 2
            for n in ("wi_0", "wi_1", "wo"):
                out[f"{p}.{ff}.DenseReluDense.{n}.weight"] = getattr(block.ff, n).weight
            out[f"{p}.{ff}.layer_norm.weight"] = block.ff_norm.weight
    return out


def xlnet_config(tf: Any, m: ModelConfig, special: dict[str, int]) -> Any:
    return tf.XLNetConfig(
        vocab_size=m.vocab_size,
        d_model=m.hidden_size,
        n_layer=m.num_layers,
        n_head=m.num_heads,
        d_inner=m.intermediate_size,
        ff_activation="gelu",
        untie_r=True,
        attn_type="bi",
        initializer_range=m.initializer_range,
        layer_norm_eps=m.layer_norm_eps,
        dropout=m.dropout,
        mem_len=None,
        reuse_len=None,
        bi_data=False,
        clamp_len=-1,
        same_length=False,
        pad_token_id=special.get("pad", m.pad_token_id),
        bos_token_id=special.get("cls"),
        eos_token_id=special.get("sep"),
    )


def xlnet_weights(model: Any, m: ModelConfig) -> Tensors:
    word = model.word_embedding.weight[: m.vocab_size]
    out: Tensors = {
        "transformer.word_embedding.weight": word,
        "transformer.mask_emb": model.mask_emb,
        "lm_loss.weight": word,
        "lm_loss.bias": model.lm_bias[: m.vocab_size],
    }
    names = ("q", "k", "v", "o", "r", "r_r_bias", "r_s_bias", "r_w_bias", "seg_embed")
    for i, layer in enumerate(model.layer):
        p = f"transformer.layer.{i}"
        for name in names:
            out[f"{p}.rel_attn.{name}"] = getattr(layer.rel_attn, name)
        for part, module in (("rel_attn", layer.rel_attn), ("ff", layer.ff)):
            out[f"{p}.{part}.layer_norm.weight"] = module.layer_norm.weight
            out[f"{p}.{part}.layer_norm.bias"] = module.layer_norm.bias
        for name in ("layer_1", "layer_2"):
            out[f"{p}.ff.{name}.weight"] = getattr(layer.ff, name).weight
            out[f"{p}.ff.{name}.bias"] = getattr(layer.ff, name).bias
    return out
