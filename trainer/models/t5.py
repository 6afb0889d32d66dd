"""T5 (Raffel et al. 2020) as released in v1.1: an encoder-decoder trained on span
corruption (`t5` objective, `trainer.data.targets`).

- Attention has no biases and no 1/sqrt(d) scaling (T5 folds it into the initialization);
  positions enter only as a learned scalar per head and relative-distance bucket, added
  to the attention logits, computed by each stack's first layer and shared by its others
  (section 2.1: 32 buckets, exact up to 8 then logarithmic up to 128; the encoder's are
  bidirectional, the decoder's look back only).
- Layer norm is RMS norm without a bias or mean subtraction, applied before each
  sublayer, and once more after each stack.
- Feed-forward is gated GELU (v1.1): wo(gelu(wi_0 x) * wi_1 x).
- The output layer is not tied to the embedding (v1.1) and the decoder's input is the
  targets shifted right behind the pad id (T5's decoder start).

Module names follow transformers' `T5ForConditionalGeneration` closely enough that
`hf_weights` below maps them one to one.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from clozeworks.corpus.shards.masking import IGNORE_INDEX
from clozeworks.trainer.batch_index import flat_index
from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.data.targets import NOISE_STATS
from clozeworks.trainer.heads import Outputs, classification
from clozeworks.trainer.models import hf
from clozeworks.trainer.models.bert import LayerStack, padded_vocab

_MASKED = -1e9  # added to a logit that must not be attended (exp underflows to 0)


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.float().pow(2).mean(-1, keepdim=True)  # [..., 1]
        return self.weight * (x.float() * torch.rsqrt(variance + self.eps)).to(x.dtype)


def relative_buckets(
    relative: torch.Tensor, bidirectional: bool, buckets: int, max_distance: int
) -> torch.Tensor:
    """T5's bucket of each relative position (key position - query position)."""
    out = torch.zeros_like(relative)
    if bidirectional:
        buckets //= 2
        out += (relative > 0).long() * buckets
        distance = relative.abs()
    else:
        distance = (-relative).clamp(min=0)
    exact = buckets // 2
    far = (
        exact
        + (
            torch.log(distance.float().clamp(min=1) / exact)
            / math.log(max_distance / exact)
            * (buckets - exact)
        ).long()
    )
    far = far.clamp(max=buckets - 1)
    return out + torch.where(distance < exact, distance, far)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, relative: bool, bidirectional: bool) -> None:
        super().__init__()
        inner = config.num_heads * config.head_width
        self.heads = config.num_heads
        self.q = nn.Linear(config.hidden_size, inner, bias=False)
        self.k = nn.Linear(config.hidden_size, inner, bias=False)
        self.v = nn.Linear(config.hidden_size, inner, bias=False)
        self.o = nn.Linear(inner, config.hidden_size, bias=False)
        self.dropout = config.attention_dropout
        self.bidirectional = bidirectional
        self.config = config
        self.relative_attention_bias = (
            nn.Embedding(config.relative_buckets, config.num_heads) if relative else None
        )

    def position_bias(self, queries: int, keys: int, device: torch.device) -> torch.Tensor:
        """[1, h, Lq, Lk] learned bias of each head for each relative position."""
        assert self.relative_attention_bias is not None
        relative = (
            torch.arange(keys, device=device)[None, :]
            - torch.arange(queries, device=device)[:, None]
        )  # [Lq, Lk]
        c = self.config
        bucket = relative_buckets(
            relative, self.bidirectional, c.relative_buckets, c.relative_max_distance
        )
        return self.relative_attention_bias(bucket).permute(2, 0, 1)[None]  # [1, h, Lq, Lk]

    def forward(self, x: torch.Tensor, memory: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, lq, _ = x.shape
        lk = memory.shape[1]
        q = self.q(x).view(b, lq, self.heads, -1).transpose(1, 2)  # [B, h, Lq, d]
        k = self.k(memory).view(b, lk, self.heads, -1).transpose(1, 2)  # [B, h, Lk, d]
        v = self.v(memory).view(b, lk, self.heads, -1).transpose(1, 2)
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias.to(q.dtype), dropout_p=p, scale=1.0
        )  # [B, h, Lq, d]
        return self.o(y.transpose(1, 2).reshape(b, lq, -1))  # [B, Lq, H]


class FeedForward(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.wi_0 = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.wi_1 = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.wo = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = F.gelu(self.wi_0(x), approximate="tanh")  # [B, L, F]
        return self.wo(self.dropout(gate * self.wi_1(x)))  # [B, L, H]


class Block(nn.Module):
    """Self-attention, (decoder: cross-attention,) feed-forward; each pre-normed."""

    def __init__(self, config: ModelConfig, relative: bool, decoder: bool) -> None:
        super().__init__()
        eps = config.layer_norm_eps
        self.self_norm = RMSNorm(config.hidden_size, eps)
        self.self_attention = Attention(config, relative, bidirectional=not decoder)
        self.cross_norm = RMSNorm(config.hidden_size, eps) if decoder else None
        self.cross_attention = Attention(config, False, False) if decoder else None
        self.ff_norm = RMSNorm(config.hidden_size, eps)
        self.ff = FeedForward(config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        x: torch.Tensor,
        bias: torch.Tensor,
        memory: torch.Tensor | None = None,
        memory_bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        h = self.self_norm(x)
        x = x + self.dropout(self.self_attention(h, h, bias))  # [B, L, H]
        if self.cross_attention is not None:
            assert self.cross_norm is not None and memory is not None and memory_bias is not None
            x = x + self.dropout(self.cross_attention(self.cross_norm(x), memory, memory_bias))
        return x + self.dropout(self.ff(self.ff_norm(x)))


class Stack(LayerStack):
    """The encoder or the decoder: embedding (shared), blocks, final RMS norm."""

    def __init__(self, config: ModelConfig, layers: int, decoder: bool) -> None:
        super().__init__()
        self.decoder = decoder
        self.blocks = nn.ModuleList(Block(config, i == 0, decoder) for i in range(layers))
        self.final_norm = RMSNorm(config.hidden_size, config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        x: torch.Tensor,
        key_mask: torch.Tensor,
        memory: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        length = x.shape[1]
        first = self.blocks[0].self_attention
        bias = first.position_bias(length, length, x.device)  # [1, h, L, L]
        allowed = key_mask.bool()[:, None, None, :]  # [B, 1, 1, L]
        if self.decoder:
            allowed = allowed & torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
        bias = bias + torch.where(allowed, 0.0, _MASKED)  # [B, h, L, L]
        memory_bias = None
        if memory_mask is not None:
            memory_bias = torch.where(memory_mask.bool(), 0.0, _MASKED)[:, None, None, :]
        x = self.dropout(x)
        recompute = self.checkpointing and self.training and torch.is_grad_enabled()
        for block in self.blocks:
            if recompute:
                x = torch.utils.checkpoint.checkpoint(
                    block, x, bias, memory, memory_bias, use_reentrant=False
                )
            else:
                x = block(x, bias, memory, memory_bias)
        return self.dropout(self.final_norm(x))  # [B, L, H]


class T5(nn.Module):
    """Encoder, decoder, untied output layer; forward(batch) -> the `t5` loss and counts."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.shared = nn.Embedding(padded_vocab(config), config.hidden_size)
        self.encoder = Stack(config, config.num_layers, decoder=False)
        self.decoder = Stack(config, config.decoder_depth, decoder=True)
        self.lm_head = nn.Linear(config.hidden_size, padded_vocab(config), bias=False)
        self.loss_weights = {"t5": 1.0}
        self.apply(self._init)

    def _init(self, module: nn.Module) -> None:
        """transformers' T5 initialization: each weight's std from the widths it joins."""
        c, factor = self.config, self.config.initializer_range
        d, inner = c.hidden_size, c.num_heads * c.head_width
        if module is self.shared or module is self.lm_head:
            nn.init.normal_(module.weight, std=factor)
        elif isinstance(module, FeedForward):
            nn.init.normal_(module.wi_0.weight, std=factor * d**-0.5)
            nn.init.normal_(module.wi_1.weight, std=factor * d**-0.5)
            nn.init.normal_(module.wo.weight, std=factor * c.intermediate_size**-0.5)
        elif isinstance(module, Attention):
            nn.init.normal_(module.q.weight, std=factor * (d * c.head_width) ** -0.5)
            nn.init.normal_(module.k.weight, std=factor * d**-0.5)
            nn.init.normal_(module.v.weight, std=factor * d**-0.5)
            nn.init.normal_(module.o.weight, std=factor * inner**-0.5)
            if module.relative_attention_bias is not None:
                nn.init.normal_(module.relative_attention_bias.weight, std=factor * d**-0.5)

    def decoder_inputs(self, labels: torch.Tensor) -> torch.Tensor:
        """The targets shifted right behind the pad id (T5's decoder start), -100 -> pad."""
        pad = self.config.pad_token_id
        shifted = torch.full_like(labels, pad)
        shifted[:, 1:] = labels[:, :-1]
        return shifted.masked_fill(shifted == IGNORE_INDEX, pad)  # [B, Lt]

    def hidden(self, batch: dict[str, Any]) -> torch.Tensor:
        """Decoder states [B, Lt, H] for the batch's inputs and (shifted) labels."""
        mask = batch["attention_mask"]  # [B, Li]
        memory = self.encoder(self.shared(batch["input_ids"]), mask)  # [B, Li, H]
        targets = self.decoder_inputs(batch["labels"])  # [B, Lt]
        real = torch.ones_like(targets)  # causal masking covers the targets' padding
        return self.decoder(self.shared(targets), real, memory, mask)  # [B, Lt, H]

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return self.lm_head(h)[..., : self.config.vocab_size]  # [..., V]

    def forward(self, batch: dict[str, Any], seed: int = 0) -> Outputs:
        h = self.hidden(batch).flatten(0, 1)  # [B * Lt, H]
        index = flat_index(batch, "labels")  # [N]
        targets = batch["labels"].flatten().index_select(0, index)  # [N]
        out: Outputs = {}
        out["loss"] = classification(out, "t5", self.logits(h.index_select(0, index)), targets)
        if NOISE_STATS in batch:  # summed over the step: the log's density and span length
            raw, noise, spans = batch[NOISE_STATS].sum(0)
            out["t5_noise_density_num"], out["t5_noise_density_den"] = noise, raw
            out["t5_mean_span_num"], out["t5_mean_span_den"] = noise, spans
        return out


# transformers' T5ForConditionalGeneration: eos is the tokenizer's [SEP], the decoder
# starts from the pad id.


def _config(tf: Any, m: ModelConfig, special: dict[str, int]) -> Any:
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


def _model(tf: Any, m: ModelConfig, special: dict[str, int], weights: hf.Tensors) -> Any:
    """`T5ForConditionalGeneration` with our weights. transformers 5 ties T5's output layer
    to the embedding whatever the config says (and reads `tie_word_embeddings = false` as
    "v1.1: do not scale the decoder output"); a v1.1 output layer of its own is kept when
    the checkpoint's two differ, so it is untied here before loading, and the saved
    config says false so that a reload does not scale."""

    class Untied(tf.T5ForConditionalGeneration):  # type: ignore[misc, name-defined]
        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self.lm_head.weight = nn.Parameter(self.lm_head.weight.detach().clone())

    model = hf.load(Untied, _config(tf, m, special), weights)
    model.__class__ = tf.T5ForConditionalGeneration  # saved and loaded as the stock class
    model.config.tie_word_embeddings = False
    return model


def _attention_weights(prefix: str, attention: Any) -> hf.Tensors:
    out = {f"{prefix}.{n}.weight": getattr(attention, n).weight for n in ("q", "k", "v", "o")}
    if attention.relative_attention_bias is not None:
        out[f"{prefix}.relative_attention_bias.weight"] = attention.relative_attention_bias.weight
    return out


def _weights(model: Any, m: ModelConfig) -> hf.Tensors:
    shared = model.shared.weight[: m.vocab_size]
    out: hf.Tensors = {
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
            out.update(_attention_weights(f"{p}.0.SelfAttention", block.self_attention))
            out[f"{p}.0.layer_norm.weight"] = block.self_norm.weight
            ff = 1
            if block.cross_attention is not None:
                out.update(_attention_weights(f"{p}.1.EncDecAttention", block.cross_attention))
                out[f"{p}.1.layer_norm.weight"] = block.cross_norm.weight
                ff = 2
            for n in ("wi_0", "wi_1", "wo"):
                out[f"{p}.{ff}.DenseReluDense.{n}.weight"] = getattr(block.ff, n).weight
            out[f"{p}.{ff}.layer_norm.weight"] = block.ff_norm.weight
    return out


def hf_weights(model: Any, m: ModelConfig) -> list[tuple[str, hf.Tensors]]:
    return [("", _weights(model, m))]


def to_transformers(tf: Any, model: Any, m: ModelConfig, special: dict[str, int]) -> list[Any]:
    return [("", _model(tf, m, special, _weights(model, m)))]
