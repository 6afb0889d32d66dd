"""BERT (Devlin et al. 2019), readable top to bottom.

Post-LN as published (`pre_ln=True` for the pre-LN variant), attention through
`scaled_dot_product_attention` with one fused q/k/v projection. Given a `Packing` (the
host's map of where a padded batch's real tokens are), the encoder runs unpadded: every
token-wise layer on the T real tokens only, attention over variable-length rows (a jagged
nested tensor: FlashAttention's variable-length kernel on a GPU). The other families reuse
these blocks: RoBERTa drops token types, ALBERT factorizes the embedding and shares layers,
ELECTRA pairs a small generator with a discriminator. The heads (MLM over predicted
positions only, sentence classifier, ...) are in `trainer/heads.py`, the encoder with its
heads in `trainer/pretraining.py`; `hf_weights` / `to_transformers` below map the latter
to transformers' `BertForPreTraining` (or `BertForMaskedLM` without a 2-class sentence
head; pre-LN: `RobertaPreLayerNormForMaskedLM`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from clozeworks.trainer.batch_index import Packing
from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.models import hf


def padded_vocab(config: ModelConfig) -> int:
    m = config.pad_vocab_to
    return -(-config.vocab_size // m) * m


class Embeddings(nn.Module):
    """Word + position (+ token type) embeddings of width E, normalized."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        width = config.embedding_width
        self.word = nn.Embedding(padded_vocab(config), width)
        self.position = nn.Embedding(config.max_position, width)
        self.token_type = (
            nn.Embedding(config.type_vocab_size, width) if config.type_vocab_size else None
        )
        self.norm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """[B, L] ids -> [B, L, E]; or [T] unpadded ids with their `positions` -> [T, E]."""
        if positions is None:
            positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.word(input_ids) + self.position(positions)  # [B, L, E] or [T, E]
        if self.token_type is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            x = x + self.token_type(token_type_ids)
        return self.dropout(self.norm(x))


class SelfAttention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.heads = config.num_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)
        self.attention_dropout = config.attention_dropout

    def forward(self, x: torch.Tensor, mask: torch.Tensor | Packing) -> torch.Tensor:
        p = self.attention_dropout if self.training else 0.0
        if isinstance(mask, Packing):
            # CPUs have no variable-length kernel (the jagged path loops over rows there):
            # attention runs padded, everything else stays unpadded.
            y = self._jagged(x, mask, p) if x.is_cuda else self._repadded(x, mask, p)
            return self.out(y)  # [T, H]
        b, length, hidden = x.shape
        q, k, v = self.qkv(x).split(hidden, dim=2)  # 3 x [B, L, H]
        q, k, v = (t.view(b, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # [B, A, L, D]
        return self.out(y.transpose(1, 2).reshape(b, length, hidden))  # [B, L, H]

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """[B, L, H] inputs -> q·kᵀ/√d [B, A, L, L], what the softmax reads before the mask
        (TinyBERT distils these)."""
        b, length, hidden = x.shape
        q, k, _ = self.qkv(x).split(hidden, dim=2)
        q, k = (t.view(b, length, self.heads, -1).transpose(1, 2) for t in (q, k))
        return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])

    def _jagged(self, x: torch.Tensor, packing: Packing, p: float) -> torch.Tensor:
        """Attention of unpadded tokens [T, H], each row attending within itself."""
        tokens, hidden = x.shape
        qkv = self.qkv(x).view(tokens, 3, self.heads, -1)  # [T, 3, A, D]

        def rows(t: torch.Tensor) -> torch.Tensor:  # [T, A, D] -> [B, A, j, D]
            return torch.nested.nested_tensor_from_jagged(
                t.contiguous(),
                packing.offsets,
                min_seqlen=packing.min_len,
                max_seqlen=packing.max_len,
            ).transpose(1, 2)

        q, k, v = (rows(t) for t in qkv.unbind(1))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p)  # [B, A, j, D]
        return y.transpose(1, 2).values().reshape(tokens, hidden)  # [T, H]

    def _repadded(self, x: torch.Tensor, packing: Packing, p: float) -> torch.Tensor:
        """The same for a device without a variable-length kernel: q, k, v scattered back
        into [B, L] rows for padded attention, the result gathered again."""
        b, length, hidden = packing.rows, packing.length, x.shape[-1]
        qkv = x.new_zeros(b * length, 3 * hidden).index_copy(0, packing.index, self.qkv(x))
        q, k, v = qkv.view(b, length, 3 * hidden).split(hidden, dim=2)  # 3 x [B, L, H]
        q, k, v = (t.view(b, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        mask = packing.mask[:, None, None, :]  # [B, 1, 1, L]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # [B, A, L, D]
        return y.transpose(1, 2).reshape(b * length, hidden).index_select(0, packing.index)


class FeedForward(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.up = nn.Linear(config.hidden_size, config.intermediate_size)
        self.down = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))  # [B, L, H]


class Layer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.pre_ln = config.pre_ln
        self.attention = SelfAttention(config)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.ffn = FeedForward(config)
        self.ffn_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | Packing,
        scores: Callable[[SelfAttention, torch.Tensor], None] | None = None,
    ) -> torch.Tensor:
        """`scores`, when given, is called with the attention and its input: inside the
        forward, where FSDP's weights are whole."""
        attention_input = self.attention_norm(x) if self.pre_ln else x
        if scores is not None:
            scores(self.attention, attention_input)
        if self.pre_ln:
            x = x + self.dropout(self.attention(attention_input, mask))
            return x + self.dropout(self.ffn(self.ffn_norm(x)))
        x = self.attention_norm(x + self.dropout(self.attention(x, mask)))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))


class LayerStack(nn.Module):
    """A stack of layers that can keep only each layer's input and recompute the layer in
    the backward pass (`checkpointing`, set from the run's grad_checkpointing): activation
    memory of one layer instead of all, for about a third more compute. Every family's
    stack is one."""

    def __init__(self) -> None:
        super().__init__()
        self.checkpointing = False


@dataclass
class Kept:
    """What a forward keeps beside its output for distillation: the embeddings' output
    and each layer's at the real tokens, [T, H] each (row-major, as `real_tokens` orders
    them), and the attention scores of `score_layers` (1-based; `scorer`)."""

    score_layers: Sequence[int] = ()
    states: list[torch.Tensor] = field(default_factory=list)
    scores: list[torch.Tensor] = field(default_factory=list)

    def scorer(self, attention_mask: torch.Tensor) -> Callable[[SelfAttention, torch.Tensor], None]:
        """What a layer calls with its attention and that attention's input ([B, L, H], or
        [T, H] unpadded): keeps the scores at every (query, key) pair of real tokens in a
        row, flat in [B, A, L, L] order."""
        mask = attention_mask.bool()  # [B, L]
        rows, length = mask.shape
        index = real_tokens(attention_mask)
        pairs = mask[:, None, :, None] & mask[:, None, None, :]  # [B, 1, L, L]

        def keep(attention: SelfAttention, x: torch.Tensor) -> None:
            if x.dim() == 2:
                x = repadded(x, index, rows, length)
            s = attention.scores(x)  # [B, A, L, L]
            self.scores.append(s[pairs.expand_as(s)])

        return keep


class Encoder(LayerStack):
    """Embeddings and the transformer stack: ids -> contextual vectors [B, L, H].

    `embeddings` may be passed in to share them (ELECTRA's generator uses the
    discriminator's); `layers` to share layers across depth (ALBERT).
    """

    def __init__(
        self,
        config: ModelConfig,
        embeddings: Embeddings | None = None,
        layers: list[Layer] | None = None,
    ) -> None:
        super().__init__()
        self.embeddings = embeddings if embeddings is not None else Embeddings(config)
        width = self.embeddings.word.embedding_dim
        # Factorized embedding (ALBERT, ELECTRA): E -> H after the embedding LayerNorm.
        self.project = nn.Linear(width, config.hidden_size) if width != config.hidden_size else None
        self.layers = nn.ModuleList(
            layers if layers is not None else [Layer(config) for _ in range(config.num_layers)]
        )
        # Pre-LN leaves the residual stream unnormalized; one LayerNorm closes it.
        self.final_norm = (
            nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if config.pre_ln else None
        )

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        packing: Packing | None = None,
        kept: Kept | None = None,
    ) -> torch.Tensor:
        """[B, L] -> [B, L, H]; `kept`, when given, gets the embeddings' output and each
        layer's at the real tokens, and the attention scores of the layers it names."""
        mask: torch.Tensor | Packing
        if packing is None:
            x = self.embeddings(input_ids, token_type_ids)  # [B, L, E]
            mask = attention_mask.bool()[:, None, None, :]  # [B, 1, 1, L], True = attend
        else:
            types = None if token_type_ids is None else token_type_ids.flatten()[packing.index]
            x = self.embeddings(input_ids.flatten()[packing.index], types, packing.positions)
            mask = packing  # x: [T, E]
        if self.project is not None:
            x = self.project(x)  # [B, L, H] or [T, H]
        real = None if kept is None or packing is not None else real_tokens(attention_mask)

        def keep(x: torch.Tensor) -> None:
            if kept is not None:
                kept.states.append(x if real is None else x.flatten(0, 1).index_select(0, real))

        keep(x)
        scores = None if kept is None or not kept.score_layers else kept.scorer(attention_mask)
        # The RNG state is replayed on recomputation, so dropout masks are the same.
        recompute = self.checkpointing and self.training and torch.is_grad_enabled()
        for n, layer in enumerate(self.layers, 1):
            score = scores if scores is not None and n in kept.score_layers else None
            if recompute:
                x = checkpoint(layer, x, mask, score, use_reentrant=False)
            else:
                x = layer(x, mask, score)
            keep(x)
        if self.final_norm is not None:
            x = self.final_norm(x)
        if packing is None:
            return x  # [B, L, H]
        return repadded(x, packing.index, packing.rows, packing.length)


def real_tokens(attention_mask: torch.Tensor) -> torch.Tensor:
    """[B, L] -> [T] the flat positions of the real tokens, row-major (`Packing.index`)."""
    return attention_mask.flatten().nonzero().squeeze(1)


def repadded(x: torch.Tensor, index: torch.Tensor, rows: int, length: int) -> torch.Tensor:
    """[T, H] real tokens at flat positions `index` -> [B, L, H], zeros at the padding."""
    padded = x.new_zeros(rows * length, x.shape[-1])
    return padded.index_copy(0, index, x).view(rows, length, -1)


def init_weights(module: nn.Module, std: float) -> None:
    """BERT's initialization: truncated normal(std) weights, zero biases, unit LayerNorms."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.trunc_normal_(module.weight, std=std, a=-2 * std, b=2 * std)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def build_encoder(config: ModelConfig) -> Encoder:
    """BERT's encoder; RoBERTa's is the same with `type_vocab_size` 0."""
    return Encoder(config)


def decay_groups(model: nn.Module, weight_decay: float) -> list[dict[str, object]]:
    """Parameter groups for AdamW: no weight decay on biases and LayerNorm (BERT)."""
    decay, no_decay = [], []
    seen: set[int] = set()
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if id(p) in seen or not p.requires_grad:
                continue
            seen.add(id(p))
            if isinstance(module, nn.LayerNorm) or name == "bias" or p.ndim < 2:
                no_decay.append(p)
            else:
                decay.append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def hf_weights(model: Any, m: ModelConfig) -> list[tuple[str, hf.Tensors]]:
    if m.pre_ln:
        return [("", hf.roberta_weights(model, m, prelayernorm=True))]
    return [("", _bert_weights(model, m))]


def to_transformers(tf: Any, model: Any, m: ModelConfig, special: dict[str, int]) -> list[Any]:
    if m.pre_ln:
        return [("", hf.roberta_model(tf, model, m, prelayernorm=True))]
    weights = _bert_weights(model, m)
    pairs = "cls.seq_relationship.weight" in weights
    cls = tf.BertForPreTraining if pairs else tf.BertForMaskedLM
    return [("", hf.load(cls, hf.bert_config(tf, m), weights))]


def _bert_weights(model: Any, m: ModelConfig) -> hf.Tensors:
    enc = model.encoder
    weights = {
        **hf.embeddings("bert.embeddings", enc, m),
        **hf.bert_layers("bert.encoder", enc),
        **hf.mlm_head(
            "cls.predictions",
            model.mlm,
            m,
            ("transform.dense", "transform.LayerNorm", "decoder", "bias"),
        ),
    }
    sentence = model.sentence
    if sentence is not None and sentence.classifier.out_features == 2:
        weights.update(hf.linear("bert.pooler.dense", sentence.pooler))
        weights.update(hf.linear("cls.seq_relationship", sentence.classifier))
    return weights


def layout(m: ModelConfig) -> hf.Layout:
    return hf.PRE_LN if m.pre_ln else hf.Layout("Bert", "bert", pooler="bert.pooler.dense")


def from_transformers(config: dict[str, Any], arch: ModelConfig, path: Any) -> ModelConfig:
    return arch
