"""Pretraining heads and their losses, and the model that puts an encoder and heads together.

Objectives (`TrainConfig.objectives`):
- `mlm`: masked language modelling; logits only at the predicted positions (about a sixth of
  the decoder matmul at 15% masking), decoder tied to the word embeddings.
- `nsp` / `sop` / `sso`: a classifier on the pooled `[CLS]` vector (2, 2 and 3 classes:
  BERT's next sentence, ALBERT's sentence order, StructBERT's next/previous/random).
- `sbo`: SpanBERT's span boundary objective: every token of a masked span is predicted from
  the two tokens just outside the span and its position inside it (the loader's
  `sbo_left_positions`, `sbo_right_positions`, `sbo_offsets`).
- `wso`: StructBERT's word structural objective: the loader shuffles trigrams and the MLM
  head predicts the original token at each shuffled position (`wso_labels`).
- `rtd`: ELECTRA's replaced token detection (in `trainer/models/electra.py`).

A model's forward takes the loader's batch dict and returns the total `loss` and, per
objective NAME, `NAME_loss`, `NAME_correct` and `NAME_count` (tensors, so ranks can sum them).
It reads the host's flat label indices and packing (`trainer/batch_index.py`) when the batch
carries them, so a training step has no shape that the device must report back.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from clozeworks.schemas.errors import UsageError
from clozeworks.schemas.kinds import SENTENCE_OBJECTIVES
from clozeworks.schemas.manifest import Manifest
from clozeworks.trainer.batch_index import IGNORE_INDEX, PACKING, flat_index
from clozeworks.trainer.config import GENERATIVE, ModelConfig, TrainConfig
from clozeworks.trainer.data.targets import check_running_text
from clozeworks.trainer.models.bert import Encoder, init_weights, padded_vocab

SENTENCE_CLASSES = {"nsp": 2, "sop": 2, "sso": 3}
# Batch keys the loader names sentence labels with (Hugging Face's names).
SENTENCE_LABEL_KEYS = {
    "nsp": "next_sentence_label",
    "sop": "sentence_order_label",
    "sso": "sentence_order_label",
}
WSO_LABELS = "wso_labels"
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


class Pretraining(nn.Module):
    """An encoder with the heads of the chosen objectives (BERT, RoBERTa, ALBERT)."""

    def __init__(self, config: ModelConfig, encoder: Encoder, objectives: tuple[str, ...]) -> None:
        super().__init__()
        self.config = config
        self.objectives = objectives
        self.encoder = encoder
        word = encoder.embeddings.word
        self.mlm = MLMHead(config, word)
        sentence = [o for o in objectives if o in SENTENCE_OBJECTIVES]
        self.sentence_objective = sentence[0] if sentence else None
        self.sentence = (
            SentenceHead(config.hidden_size, SENTENCE_CLASSES[sentence[0]]) if sentence else None
        )
        self.sbo = SpanBoundaryHead(config, word) if "sbo" in objectives else None
        self.loss_weights = {o: 1.0 for o in objectives}
        self.apply(partial(init_weights, std=config.initializer_range))

    def forward(self, batch: dict[str, Any], seed: int = 0) -> Outputs:
        """Losses and counts for one batch; `labels` is -100 where nothing is predicted."""
        h = self.encoder(
            batch["input_ids"],
            batch["attention_mask"],
            batch.get("token_type_ids"),
            batch.get(PACKING),
        )  # [B, L, H]
        out: Outputs = {}
        index = flat_index(batch, "labels")  # [N]
        flat = h.flatten(0, 1)  # [B * L, H]
        targets = batch["labels"].flatten().index_select(0, index)  # [N]
        loss = classification(out, "mlm", self.mlm(flat.index_select(0, index)), targets)
        if self.sentence is not None and self.sentence_objective is not None:
            key = SENTENCE_LABEL_KEYS[self.sentence_objective]
            logits = self.sentence(h)  # [B, C]
            loss = loss + classification(out, self.sentence_objective, logits, batch[key])
        if self.sbo is not None:
            logits = self.sbo(h, index, batch)
            loss = loss + classification(out, "sbo", logits, targets)
        if "wso" in self.objectives:
            shuffled = flat_index(batch, WSO_LABELS)  # [S]
            wso = batch[WSO_LABELS].flatten().index_select(0, shuffled)
            loss = loss + classification(out, "wso", self.mlm(flat.index_select(0, shuffled)), wso)
        out["loss"] = loss
        return out


def objective_counts(batch: dict[str, torch.Tensor], objectives: tuple[str, ...]) -> list[int]:
    """How many predictions each objective makes on `batch`, in `objectives` order.

    The loop sums these over micro-batches and ranks before the backward passes, so that
    every objective's loss is normalized by its count in the whole global batch: gradient
    accumulation and DDP then give the gradient of one big batch.
    """
    predicted = int((batch["labels"] != IGNORE_INDEX).sum())
    counts = {
        "mlm": predicted,
        "sbo": predicted,
        "rtd": int(batch["attention_mask"].sum()),
        "wso": int((batch[WSO_LABELS] != IGNORE_INDEX).sum()) if WSO_LABELS in batch else 0,
        "clm": predicted,
        "t5": predicted,
        "plm": predicted,
    }
    sequences = int(batch["input_ids"].shape[0])
    return [counts.get(o, sequences) for o in objectives]


def check_objectives(config: TrainConfig, manifest: Manifest, source: str) -> None:
    """UsageError unless the model family and the shard set can train `config.objectives`."""
    objectives, family = config.objectives, config.model.family
    generative = [o for o in objectives if o in GENERATIVE.values()]
    if family in GENERATIVE or generative:
        check_generative(config, manifest, source)
        return
    if "mlm" not in objectives:
        raise UsageError(f"objectives {','.join(objectives)}: every family trains with mlm")
    sentence = [o for o in objectives if o in SENTENCE_OBJECTIVES]
    if len(sentence) > 1:
        raise UsageError(f"choose one sentence objective, not {', '.join(sentence)}")
    if sentence and manifest.mode != sentence[0]:
        raise UsageError(
            f"objective {sentence[0]} needs shards built with --mode {sentence[0]}; "
            f"{source} holds {manifest.mode} sequences"
        )
    if sentence and family in ("roberta", "electra"):
        raise UsageError(
            f"{family} has no sentence objective; use bert or albert for {sentence[0]}"
        )
    if family == "electra" and set(objectives) != {"mlm", "rtd"}:
        raise UsageError("electra trains with exactly mlm (its generator) and rtd")
    if "rtd" in objectives and family != "electra":
        raise UsageError("rtd needs the electra family (a generator to replace tokens)")
    premask = manifest.premask
    kind = premask.kind if premask is not None else config.masking.kind
    if "sbo" in objectives and kind != "span":
        raise UsageError(f"sbo predicts masked spans; use span masking (the masking is {kind})")


def check_generative(config: TrainConfig, manifest: Manifest, source: str) -> None:
    """The gpt, t5 and xlnet families train their own objective alone, on unmasked running
    text."""
    family, objectives = config.model.family, config.objectives
    own = GENERATIVE.get(family)
    if own is None or objectives != (own,):
        wanted = ", ".join(f"{f} trains {o}" for f, o in GENERATIVE.items())
        raise UsageError(f"objectives {','.join(objectives)} with family {family}: {wanted}, alone")
    check_running_text(objectives, manifest, source)


def with_pair_objective(config: TrainConfig, manifest: Manifest) -> TrainConfig:
    """`config` training its shard set's sentence objective too, when it would otherwise
    train BERT or ALBERT with MLM alone on pairs (what the pairs are for: `mlm,nsp` on nsp
    shards, as BERT did)."""
    pairs = manifest.mode in SENTENCE_OBJECTIVES and config.model.family in ("bert", "albert")
    if pairs and config.objectives == ("mlm",):
        return replace(config, objectives=("mlm", manifest.mode))
    return config
