"""GPT (Radford et al. 2018, 2019): a causal Transformer decoder trained to predict the
next token (`clm`). GPT-2's layout: LayerNorm before each sublayer and after the last
block, learned positions, GELU (tanh form), the output layer tied to the token embedding,
residual projections initialized with std 0.02 / sqrt(2 x layers).

Packed shards feed it: `full-sentences` rows run across documents with `[SEP]` between
them (as GPT-2 trained on a stream with `<|endoftext|>`), `doc-sentences` rows stay in
one document. The loader's `labels` are the next token (-100 where there is none), so the
loss here is a cross-entropy at the labelled positions only.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from clozeworks.trainer.batch_index import flat_index
from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.heads import Outputs, classification
from clozeworks.trainer.models import hf
from clozeworks.trainer.models.bert import LayerStack, padded_vocab


def normal_init(module: nn.Module, std: float) -> None:
    """GPT-2's and XLNet's initialization: normal(std) weights (not truncated), zero biases."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=std)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.heads = config.num_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.attention_dropout = config.attention_dropout
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, length, hidden = x.shape
        q, k, v = self.qkv(x).split(hidden, dim=2)  # [B, L, H] each
        q, k, v = (t.view(b, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        p = self.attention_dropout if self.training else 0.0
        # Rows are real tokens then padding, so causal attention never lets a real token
        # see padding; the padded positions' outputs carry no label.
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # [B, h, L, d]
        y = y.transpose(1, 2).reshape(b, length, hidden)  # [B, L, H]
        return self.dropout(self.proj(y))


class Block(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.fc = nn.Linear(config.hidden_size, config.intermediate_size)
        self.fc_proj = nn.Linear(config.intermediate_size, config.hidden_size)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))  # [B, L, H]
        h = F.gelu(self.fc(self.ln_2(x)), approximate="tanh")  # [B, L, 4H]
        return x + self.dropout(self.fc_proj(h))


class GPT(LayerStack):
    """Decoder and tied output layer; forward(batch) -> the `clm` loss and counts."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(padded_vocab(config), config.hidden_size)
        self.wpe = nn.Embedding(config.max_position, config.hidden_size)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.num_layers))
        self.ln_f = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.loss_weights = {"clm": 1.0}
        self.apply(self._init)
        residual_std = config.initializer_range / math.sqrt(2 * config.num_layers)
        for block in self.blocks:
            nn.init.normal_(block.attn.proj.weight, std=residual_std)
            nn.init.normal_(block.fc_proj.weight, std=residual_std)

    def _init(self, module: nn.Module) -> None:
        normal_init(module, self.config.initializer_range)

    def hidden(self, input_ids: torch.Tensor) -> torch.Tensor:
        length = input_ids.shape[1]
        if length > self.config.max_position:
            raise ValueError(f"rows of {length} tokens; the model has {self.config.max_position}")
        positions = torch.arange(length, device=input_ids.device)
        x = self.drop(self.wte(input_ids) + self.wpe(positions))  # [B, L, H]
        for block in self.blocks:
            if self.checkpointing and self.training and torch.is_grad_enabled():
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.ln_f(x)  # [B, L, H]

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self.wte.weight)[..., : self.config.vocab_size]  # [..., V]

    def forward(self, batch: dict[str, Any], seed: int = 0) -> Outputs:
        h = self.hidden(batch["input_ids"]).flatten(0, 1)  # [B * L, H]
        index = flat_index(batch, "labels")  # [N]
        targets = batch["labels"].flatten().index_select(0, index)  # [N]
        out: Outputs = {}
        out["loss"] = classification(out, "clm", self.logits(h.index_select(0, index)), targets)
        return out


# transformers' GPT2LMHeadModel: its Conv1D stores [in, out], so linear weights go over
# transposed (views, so copying into them loads our model); bos / eos are the tokenizer's
# [CLS] / [SEP] (<s> / </s>).


def _config(tf: Any, m: ModelConfig, special: dict[str, int]) -> Any:
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


def _weights(model: Any, m: ModelConfig) -> hf.Tensors:
    out: hf.Tensors = {
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


def hf_weights(model: Any, m: ModelConfig) -> list[tuple[str, hf.Tensors]]:
    return [("", _weights(model, m))]


def to_transformers(tf: Any, model: Any, m: ModelConfig, special: dict[str, int]) -> list[Any]:
    return [("", hf.load(tf.GPT2LMHeadModel, _config(tf, m, special), _weights(model, m)))]
