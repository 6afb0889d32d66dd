"""BERT (Devlin et al. 2019), readable top to bottom.

Post-LN as published (`pre_ln=True` for the pre-LN variant), attention through
`scaled_dot_product_attention`, and an MLM head that computes logits only at the positions
being predicted: at 15% masking that is about a sixth of the decoder matmul.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from trainer.config import ModelConfig

IGNORE_INDEX = -100


def padded_vocab(config: ModelConfig) -> int:
    m = config.pad_vocab_to
    return -(-config.vocab_size // m) * m


class Embeddings(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.word = nn.Embedding(padded_vocab(config), config.hidden_size)
        self.position = nn.Embedding(config.max_position, config.hidden_size)
        self.token_type = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        length = input_ids.shape[1]
        positions = torch.arange(length, device=input_ids.device)
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
        return self.dropout(self.norm(x))  # [B, L, H]


class SelfAttention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.heads = config.num_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)
        self.attention_dropout = config.attention_dropout

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, length, hidden = x.shape
        q, k, v = self.qkv(x).split(hidden, dim=2)  # 3 x [B, L, H]
        q, k, v = (t.view(b, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        p = self.attention_dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # [B, A, L, D]
        return self.out(y.transpose(1, 2).reshape(b, length, hidden))  # [B, L, H]


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

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.pre_ln:
            x = x + self.dropout(self.attention(self.attention_norm(x), mask))
            return x + self.dropout(self.ffn(self.ffn_norm(x)))
        x = self.attention_norm(x + self.dropout(self.attention(x, mask)))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))


class Encoder(nn.Module):
    """Embeddings and the transformer stack: ids -> contextual vectors [B, L, H]."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(Layer(config) for _ in range(config.num_layers))
        # Pre-LN leaves the residual stream unnormalized; one LayerNorm closes it.
        self.final_norm = (
            nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if config.pre_ln else None
        )

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.embeddings(input_ids, token_type_ids)  # [B, L, H]
        mask = attention_mask.bool()[:, None, None, :]  # [B, 1, 1, L], True = attend
        for layer in self.layers:
            x = layer(x, mask)
        return x if self.final_norm is None else self.final_norm(x)


class MLMHead(nn.Module):
    """Transform + decoder tied to the word embeddings, applied to selected rows only."""

    def __init__(self, config: ModelConfig, word_embeddings: nn.Embedding) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = word_embeddings  # tied: the weight is shared, not copied
        self.bias = nn.Parameter(torch.zeros(padded_vocab(config)))
        self.vocab_size = config.vocab_size

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = self.norm(F.gelu(self.dense(h)))  # [N, H]
        logits = F.linear(h, self.decoder.weight, self.bias)  # [N, V_padded]
        return logits[:, : self.vocab_size]  # [N, V]


class BertForPretraining(nn.Module):
    """Encoder + MLM head (+ a [CLS] sentence classifier when `sentence_classes` > 0)."""

    def __init__(self, config: ModelConfig, sentence_classes: int = 0) -> None:
        super().__init__()
        self.config = config
        self.encoder = Encoder(config)
        self.mlm = MLMHead(config, self.encoder.embeddings.word)
        self.pooler = (
            nn.Linear(config.hidden_size, config.hidden_size) if sentence_classes else None
        )
        self.sentence = (
            nn.Linear(config.hidden_size, sentence_classes) if sentence_classes else None
        )
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        # BERT: truncated normal(0.02) for weights, zeros for biases, ones for LayerNorm.
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.trunc_normal_(module.weight, std=std, a=-2 * std, b=2 * std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        labels: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        sentence_labels: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """Losses and counts for one batch; `labels` is -100 where nothing is predicted."""
        h = self.encoder(input_ids, attention_mask, token_type_ids)  # [B, L, H]
        predict = labels != IGNORE_INDEX  # [B, L]
        targets = labels[predict]  # [N]
        logits = self.mlm(h[predict])  # [N, V]
        mlm_loss = F.cross_entropy(logits.float(), targets)
        out = {
            "mlm_loss": mlm_loss,
            "mlm_correct": (logits.argmax(-1) == targets).sum(),
            "mlm_count": torch.tensor(targets.numel(), device=h.device),
        }
        loss = mlm_loss
        if self.sentence is not None and self.pooler is not None and sentence_labels is not None:
            pooled = torch.tanh(self.pooler(h[:, 0]))  # [B, H]
            sentence_logits = self.sentence(pooled)  # [B, C]
            sentence_loss = F.cross_entropy(sentence_logits.float(), sentence_labels)
            out["sentence_loss"] = sentence_loss
            out["sentence_correct"] = (sentence_logits.argmax(-1) == sentence_labels).sum()
            loss = loss + sentence_loss
        out["loss"] = loss
        return out

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


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


def check_finite(loss: torch.Tensor) -> bool:
    return bool(torch.isfinite(loss).item()) and not math.isnan(float(loss))
