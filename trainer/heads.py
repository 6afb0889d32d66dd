"""Pretraining heads and their losses.

- MLM: logits only at the predicted positions (about a sixth of the decoder matmul at 15%
  masking), decoder tied to the word embeddings.
- Sentence (nsp / sop / sso): a classifier on the pooled `[CLS]` vector (2, 2 and 3
  classes: BERT's next sentence, ALBERT's sentence order, StructBERT's next/previous/random).
- SBO: SpanBERT's span boundary objective: every token of a masked span is predicted from
  the two tokens just outside the span and its position inside it (the loader's
  `sbo_left_positions`, `sbo_right_positions`, `sbo_offsets`).
- RTD: ELECTRA's replaced token detection, one logit per token.

`classification` adds one objective's loss, correct count and count to a model's outputs
(tensors, so ranks can sum them).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from clozeworks.trainer.batch_index import IGNORE_INDEX
from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.models.bert import padded_vocab

SBO_LEFT, SBO_RIGHT, SBO_OFFSETS = "sbo_left_positions", "sbo_right_positions", "sbo_offsets"

Outputs = dict[str, torch.Tensor]


class MLMHead(nn.Module):
    """Transform (H -> E, GELU, LayerNorm) + decoder tied to the word embeddings."""

    def __init__(self, config: ModelConfig, word: nn.Embedding, hidden: int | None = None) -> None:
        super().__init__()
        width = word.embedding_dim
        self.dense = nn.Linear(hidden or config.hidden_size, width)
        self.norm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.decoder = word  # tied: the weight is shared, not copied
        self.bias = nn.Parameter(torch.zeros(padded_vocab(config)))
        self.vocab_size = config.vocab_size

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = self.norm(F.gelu(self.dense(h)))  # [N, E]
        logits = F.linear(h, self.decoder.weight, self.bias)  # [N, V_padded]
        return logits[..., : self.vocab_size]  # [N, V]


class SentenceHead(nn.Module):
    """BERT's pooler (dense + tanh on [CLS]) and a linear classifier."""

    def __init__(self, hidden: int, classes: int) -> None:
        super().__init__()
        self.pooler = nn.Linear(hidden, hidden)
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        pooled = torch.tanh(self.pooler(h[:, 0]))  # [B, H]
        return self.classifier(pooled)  # [B, C]


class SpanBoundaryHead(nn.Module):
    """SpanBERT (Joshi et al. 2020, eq. 1): y_i = f(x_{s-1}, x_{e+1}, p_{i-s+1}).

    f is two layers of dense + GELU + LayerNorm: the first here, the second is an MLM-head
    transform of its own, whose decoder is the (tied) word embeddings.
    """

    def __init__(self, config: ModelConfig, word: nn.Embedding) -> None:
        super().__init__()
        hidden, eps = config.hidden_size, config.layer_norm_eps
        self.position = nn.Embedding(config.sbo_max_span, hidden)
        self.mlp = nn.Sequential(
            nn.Linear(3 * hidden, hidden), nn.GELU(), nn.LayerNorm(hidden, eps=eps)
        )
        self.out = MLMHead(config, word)

    def forward(
        self, h: torch.Tensor, index: torch.Tensor, batch: dict[str, torch.Tensor]
    ) -> torch.Tensor:
        """Logits [N, V] for the predicted positions `index` (flat, row-major).

        Span boundaries and offsets come from the loader's `sbo_left_positions`,
        `sbo_right_positions` and `sbo_offsets`; without them, the same spans are found
        here: a span is a maximal run of predicted positions.
        """
        length = h.shape[1]
        rows = (index // length, index % length)  # N predicted positions
        if SBO_LEFT in batch:
            left, right = batch[SBO_LEFT], batch[SBO_RIGHT]  # [B, L] each
            offset = batch[SBO_OFFSETS][rows]  # [N]
        else:
            left, right = span_boundaries(batch["labels"] != IGNORE_INDEX)
            offset = rows[1] - left[rows] - 1
        inside = offset.clamp(max=self.position.num_embeddings - 1)  # [N]
        x = torch.cat(
            [h[rows[0], left[rows]], h[rows[0], right[rows]], self.position(inside)], dim=-1
        )  # [N, 3H]
        return self.out(self.mlp(x))  # [N, V]


def span_boundaries(predict: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For every position, the nearest unpredicted position before and after it. [B, L] x 2.

    A span is a run of consecutive predicted positions; its boundary tokens are the ones
    just outside it. `[CLS]` and `[SEP]` are never predicted, so boundaries always exist in
    a sequence the loader made; they are clamped to the row otherwise.
    """
    b, length = predict.shape
    index = torch.arange(length, device=predict.device).expand(b, length)
    left = torch.where(predict, torch.full_like(index, -1), index).cummax(1).values
    after = torch.where(predict, torch.full_like(index, length), index)
    right = after.flip(1).cummin(1).values.flip(1)
    return left.clamp(min=0), right.clamp(max=length - 1)


class RTDHead(nn.Module):
    """ELECTRA's discriminator head: dense + GELU + one logit per token (replaced or not)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.predict = nn.Linear(hidden, 1)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.predict(F.gelu(self.dense(h))).squeeze(-1)  # [B, L]


def classification(
    out: Outputs, name: str, logits: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """Cross-entropy of `logits` [N, C] against `targets` [N] into `out`; returns the loss.

    Zero targets give a zero loss that still depends on the graph (so DDP sees every
    parameter used), rather than the NaN of a mean over nothing.
    """
    count = targets.numel()
    loss = F.cross_entropy(logits.float(), targets, reduction="sum") / max(count, 1)
    out[f"{name}_loss"] = loss
    out[f"{name}_correct"] = (logits.argmax(-1) == targets).sum()
    # On the host: the count is known there (a shape), and a host-to-device copy would wait.
    out[f"{name}_count"] = torch.tensor(count)
    return loss
