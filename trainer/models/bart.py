"""BART (Lewis et al. 2020): a bidirectional encoder over the noised document and an
autoregressive decoder that regenerates it (`bart` objective, `trainer.data.denoising`).

- The Transformer of Vaswani et al. as fairseq's `bart.base` / `bart.large` build it:
  post-LN layers with biases, GELU, learned positions (two rows more than the positions:
  fairseq's offset past its padding index), a LayerNorm on each stack's embeddings, no
  embedding scaling.
- One token embedding for encoder, decoder and output layer, plus a bias on the logits.
- The decoder reads the original row shifted right behind `</s>` (the shards' `[SEP]`):
  fairseq's `prev_output_tokens`, transformers' `shift_tokens_right`.
- The loss is the cross-entropy of every token of the original row (fairseq pretrained
  with 0.1 label smoothing; here it is plain, as transformers' `labels` loss).

Module names follow transformers' `BartForConditionalGeneration` so that `hf_weights`
below maps them one to one.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from clozeworks.trainer.batch_index import flat_index
from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.data.denoising import DECODER_INPUTS, DENOISE_STATS, shift_right
from clozeworks.trainer.heads import Outputs, classification
from clozeworks.trainer.models import hf
from clozeworks.trainer.models.bert import LayerStack, padded_vocab

POSITION_OFFSET = 2


class Attention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        width = config.hidden_size
        self.heads = config.num_heads
        self.q_proj = nn.Linear(width, width)
        self.k_proj = nn.Linear(width, width)
        self.v_proj = nn.Linear(width, width)
        self.out_proj = nn.Linear(width, width)
        self.dropout = config.attention_dropout

    def forward(self, x: torch.Tensor, memory: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        b, lq, width = x.shape
        lk = memory.shape[1]
        q = self.q_proj(x).view(b, lq, self.heads, -1).transpose(1, 2)  # [B, h, Lq, d]
        k = self.k_proj(memory).view(b, lk, self.heads, -1).transpose(1, 2)  # [B, h, Lk, d]
        v = self.v_proj(memory).view(b, lk, self.heads, -1).transpose(1, 2)
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p)
        return self.out_proj(y.transpose(1, 2).reshape(b, lq, width))  # [B, Lq, H]


class Block(nn.Module):
    """Self-attention, (decoder: cross-attention,) feed-forward; each followed by its norm."""

    def __init__(self, config: ModelConfig, decoder: bool) -> None:
        super().__init__()
        width, eps = config.hidden_size, config.layer_norm_eps
        self.self_attn = Attention(config)
        self.self_attn_layer_norm = nn.LayerNorm(width, eps=eps)
        self.encoder_attn = Attention(config) if decoder else None
        self.encoder_attn_layer_norm = nn.LayerNorm(width, eps=eps) if decoder else None
        self.fc1 = nn.Linear(width, config.intermediate_size)
        self.fc2 = nn.Linear(config.intermediate_size, width)
        self.final_layer_norm = nn.LayerNorm(width, eps=eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        x: torch.Tensor,
        allowed: torch.Tensor,
        memory: torch.Tensor | None = None,
        memory_allowed: torch.Tensor | None = None,
    ) -> torch.Tensor:
        x = self.self_attn_layer_norm(x + self.dropout(self.self_attn(x, x, allowed)))
        if self.encoder_attn is not None:
            assert self.encoder_attn_layer_norm is not None and memory is not None
            assert memory_allowed is not None
            y = self.encoder_attn(x, memory, memory_allowed)
            x = self.encoder_attn_layer_norm(x + self.dropout(y))
        y = self.fc2(F.gelu(self.fc1(x)))  # [B, L, H]
        return self.final_layer_norm(x + self.dropout(y))


class Stack(LayerStack):
    """The encoder or the decoder: positions, embedding norm, layers."""

    def __init__(self, config: ModelConfig, layers: int, decoder: bool) -> None:
        super().__init__()
        self.decoder = decoder
        width = config.hidden_size
        self.embed_positions = nn.Embedding(config.max_position + POSITION_OFFSET, width)
        self.layernorm_embedding = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.layers = nn.ModuleList(Block(config, decoder) for _ in range(layers))
        self.dropout = nn.Dropout(config.dropout)
        self.max_position = config.max_position

    def forward(
        self,
        embedded: torch.Tensor,
        key_mask: torch.Tensor,
        memory: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        length = embedded.shape[1]
        if length > self.max_position:
            raise ValueError(f"a row of {length} tokens; the model has {self.max_position}")
        at = torch.arange(length, device=embedded.device) + POSITION_OFFSET
        x = self.dropout(self.layernorm_embedding(embedded + self.embed_positions(at)))
        allowed = key_mask.bool()[:, None, None, :]  # [B, 1, 1, L]
        if self.decoder:
            causal = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
            allowed = allowed & causal
        memory_allowed = None if memory_mask is None else memory_mask.bool()[:, None, None, :]
        recompute = self.checkpointing and self.training and torch.is_grad_enabled()
        for layer in self.layers:
            if recompute:
                x = torch.utils.checkpoint.checkpoint(
                    layer, x, allowed, memory, memory_allowed, use_reentrant=False
                )
            else:
                x = layer(x, allowed, memory, memory_allowed)
        return x  # [B, L, H]


class BART(nn.Module):
    """Encoder, decoder, output layer tied to the embedding; forward(batch) -> the `bart`
    loss and counts."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.shared = nn.Embedding(
            padded_vocab(config), config.hidden_size, padding_idx=config.pad_token_id
        )
        self.encoder = Stack(config, config.num_layers, decoder=False)
        self.decoder = Stack(config, config.decoder_depth, decoder=True)
        self.register_buffer("final_logits_bias", torch.zeros(padded_vocab(config)))
        self.loss_weights = {"bart": 1.0}
        self.apply(self._init)

    def _init(self, module: nn.Module) -> None:
        """fairseq's and transformers' BART initialization: N(0, 0.02) weights, zero biases,
        the padding row zero."""
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=std)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=std)
            if module.padding_idx is not None:
                nn.init.zeros_(module.weight[module.padding_idx])

    def hidden(self, batch: dict[str, Any]) -> torch.Tensor:
        """Decoder states [B, Lt, H] for the batch's inputs and decoder inputs (the labels
        shifted right behind `</s>`, `trainer.data.denoising`)."""
        mask = batch["attention_mask"]  # [B, Li]
        memory = self.encoder(self.shared(batch["input_ids"]), mask)  # [B, Li, H]
        targets = batch[DECODER_INPUTS]  # [B, Lt]
        real = torch.ones_like(targets)  # causal masking covers the targets' padding
        return self.decoder(self.shared(targets), real, memory, mask)  # [B, Lt, H]

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        v = self.config.vocab_size
        return F.linear(h, self.shared.weight[:v], self.final_logits_bias[:v])  # [..., V]

    def forward(self, batch: dict[str, Any], seed: int = 0) -> Outputs:
        h = self.hidden(batch).flatten(0, 1)  # [B * Lt, H]
        index = flat_index(batch, "labels")  # [N]
        targets = batch["labels"].flatten().index_select(0, index)  # [N]
        out: Outputs = {}
        out["loss"] = classification(out, "bart", self.logits(h.index_select(0, index)), targets)
        if DENOISE_STATS in batch:  # summed over the step: how much shorter the inputs are
            tokens, noised, masks = batch[DENOISE_STATS].sum(0)
            out["bart_length_ratio_num"], out["bart_length_ratio_den"] = noised, tokens
            out["bart_masks_per_token_num"], out["bart_masks_per_token_den"] = masks, tokens
        return out


class SequenceModel(nn.Module):
    """BART's own sequence classifier (section 3.1; transformers'
    `BartForSequenceClassification`): the same row into encoder and decoder (the decoder's
    shifted right behind `</s>`), the decoder's state at the row's last `</s>` through
    dense + tanh and a linear layer; [B, L] ids -> [B, C] logits (C = 1: regression)."""

    def __init__(self, config: ModelConfig, bart: BART, outputs: int, special: dict[str, int]):
        super().__init__()
        self.config = config
        self.bart = bart
        self.special = dict(special)  # pad, cls (bos) and sep (eos) ids of the tokenizer
        width = config.hidden_size
        self.dense = nn.Linear(width, width)
        self.out_proj = nn.Linear(width, outputs)
        self.dropout = nn.Dropout(config.dropout)
        for layer in (self.dense, self.out_proj):
            nn.init.normal_(layer.weight, std=config.initializer_range)
            nn.init.zeros_(layer.bias)

    @property
    def outputs(self) -> int:
        return self.out_proj.out_features

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        eos, pad = self.special["sep"], self.special["pad"]
        shifted = shift_right(input_ids, attention_mask.bool(), eos, pad)
        batch = {"input_ids": input_ids, "attention_mask": attention_mask, DECODER_INPUTS: shifted}
        h = self.bart.hidden(batch)  # [B, L, H]
        at = torch.arange(input_ids.shape[1], device=input_ids.device)
        last = torch.where(input_ids == eos, at, -1).max(1).values  # [B]
        x = h[torch.arange(len(h), device=h.device), last]  # [B, H]
        x = torch.tanh(self.dense(self.dropout(x)))
        return self.out_proj(self.dropout(x))  # [B, C]


def sequence_model(
    config: ModelConfig, pretrained: nn.Module, outputs: int, special: dict[str, int]
) -> SequenceModel:
    assert isinstance(pretrained, BART)
    return SequenceModel(config, pretrained, outputs, special)


def sequence_to_transformers(tf: Any, model: SequenceModel, task: dict[str, Any]) -> Any:
    """`BartForSequenceClassification` with `model`'s weights; `task`: num_labels,
    id2label, ... for its config."""
    m = model.config
    weights = {k: v for k, v in _weights(model.bart, m).items() if k.startswith("model.")}
    weights.update(hf.linear("classification_head.dense", model.dense))
    weights.update(hf.linear("classification_head.out_proj", model.out_proj))
    config = _config(tf, m, model.special, classifier_dropout=m.dropout, **task)
    return hf.load(tf.BartForSequenceClassification, config, weights)


# transformers' BartForConditionalGeneration: bos and eos are the tokenizer's [CLS] and
# [SEP], the decoder starts from eos, as fairseq's.


def _config(tf: Any, m: ModelConfig, special: dict[str, int], **extra: Any) -> Any:
    eos = special.get("sep")
    return tf.BartConfig(
        vocab_size=m.vocab_size,
        d_model=m.hidden_size,
        encoder_layers=m.num_layers,
        decoder_layers=m.decoder_depth,
        encoder_attention_heads=m.num_heads,
        decoder_attention_heads=m.num_heads,
        encoder_ffn_dim=m.intermediate_size,
        decoder_ffn_dim=m.intermediate_size,
        max_position_embeddings=m.max_position,
        dropout=m.dropout,
        attention_dropout=m.attention_dropout,
        activation_dropout=0.0,
        activation_function="gelu",
        init_std=m.initializer_range,
        scale_embedding=False,
        pad_token_id=special.get("pad", m.pad_token_id),
        bos_token_id=special.get("cls"),
        eos_token_id=eos,
        decoder_start_token_id=eos,
        forced_eos_token_id=eos,
        tie_word_embeddings=True,
        **extra,
    )


def _block_weights(prefix: str, block: Block) -> hf.Tensors:
    out: hf.Tensors = {}
    parts: list[tuple[str, nn.Module | None]] = [
        ("self_attn", block.self_attn),
        ("encoder_attn", block.encoder_attn),
    ]
    for name, attention in parts:
        if attention is None:
            continue
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            linear = getattr(attention, proj)
            out[f"{prefix}.{name}.{proj}.weight"] = linear.weight
            out[f"{prefix}.{name}.{proj}.bias"] = linear.bias
    norms = ("self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm")
    for name in (*norms, "fc1", "fc2"):
        module = getattr(block, name)
        if module is not None:
            out[f"{prefix}.{name}.weight"] = module.weight
            out[f"{prefix}.{name}.bias"] = module.bias
    return out


def _weights(model: Any, m: ModelConfig) -> hf.Tensors:
    shared = model.shared.weight[: m.vocab_size]
    out: hf.Tensors = {
        "model.shared.weight": shared,
        "model.encoder.embed_tokens.weight": shared,
        "model.decoder.embed_tokens.weight": shared,
        "lm_head.weight": shared,
        "final_logits_bias": model.final_logits_bias[None, : m.vocab_size],
    }
    for side in ("encoder", "decoder"):
        stack = getattr(model, side)
        p = f"model.{side}"
        out[f"{p}.embed_positions.weight"] = stack.embed_positions.weight
        out[f"{p}.layernorm_embedding.weight"] = stack.layernorm_embedding.weight
        out[f"{p}.layernorm_embedding.bias"] = stack.layernorm_embedding.bias
        for i, block in enumerate(stack.layers):
            out.update(_block_weights(f"{p}.layers.{i}", block))
    return out


def hf_weights(model: Any, m: ModelConfig) -> list[tuple[str, hf.Tensors]]:
    return [("", _weights(model, m))]


def to_transformers(tf: Any, model: Any, m: ModelConfig, special: dict[str, int]) -> list[Any]:
    config = _config(tf, m, special)
    return [("", hf.load(tf.BartForConditionalGeneration, config, _weights(model, m)))]
