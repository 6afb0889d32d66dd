"""The distillation objectives as head parts of the student's encoder-with-heads model
(trainer/head_parts.py). DistilBERT's: `kd`, the soft targets of the teacher's MLM softmax
at the masked positions, and `cos`, the cosine between the student's and the teacher's
last hidden states at every real token; beside the student's own `mlm` they make its
triple loss. TinyBERT's: `hid`, the MSE between the student's embeddings and layer
outputs (projected to the teacher's width by the part's `fit`) and those of the teacher
layers the uniform map gives them, and `att`, the MSE between their attention scores
before the softmax; both at the real tokens only, so that a padded and an unpadded batch
give one loss (TinyBERT's code averages over the padding too).

The teacher is not a part of the student: it is kept on the model out of its module tree
(`attach`), so it is in no checkpoint, no optimizer, no gradient clipping, no DDP
all-reduce and no FSDP shard. It runs once per batch, without gradients and in eval mode
(no dropout), inside the loop's autocast (bf16 on a GPU under `precision auto`); its
outputs live in the batch's cache until the step's backward pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from clozeworks.trainer.batch_index import PACKING
from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.distill.losses import (
    DISTILBERT_WEIGHTS,
    attention_loss,
    cosine_loss,
    hidden_loss,
    soft_target_loss,
    uniform_layers,
)
from clozeworks.trainer.head_parts import Encoded
from clozeworks.trainer.heads import Outputs
from clozeworks.trainer.models.bert import Kept

TEACHER = "_teacher"
TEMPERATURE = "_temperature"


def attach(student: nn.Module, teacher: nn.Module, temperature: float) -> None:
    """Keep `teacher` (frozen, eval mode) on `student` outside its parameters."""
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    object.__setattr__(student, TEACHER, teacher)
    object.__setattr__(student, TEMPERATURE, temperature)
    weights: dict[str, float] = student.loss_weights  # type: ignore[assignment]
    weights.update({o: w for o, w in DISTILBERT_WEIGHTS.items() if weights.get(o)})


def teacher_of(model: nn.Module) -> nn.Module:
    teacher = getattr(model, TEACHER, None)
    if teacher is None:
        raise RuntimeError("kd and cos learn from a teacher; none is attached")
    return teacher


def _teacher_forward(model: nn.Module, x: Encoded) -> tuple[torch.Tensor, Kept | None]:
    """The teacher's last hidden states [B, L, H] and, when the student keeps its layers,
    the teacher's embeddings, the outputs and scores of the layers the uniform map gives
    the student's: one forward per batch, whatever the objectives read of it."""
    if "teacher" not in x.cache:
        teacher: Any = teacher_of(model)
        batch = x.batch
        types = batch.get("token_type_ids") if teacher.config.type_vocab_size else None
        student: Kept | None = x.cache.get("kept")
        kept, mapped = None, []
        if student is not None:
            mapped = uniform_layers(model.config.num_layers, teacher.config.num_layers)
            kept = Kept(mapped if student.score_layers else ())
        with torch.no_grad():
            h = teacher.encoder(batch["input_ids"], batch["attention_mask"], types,
                                batch.get(PACKING), kept)  # fmt: skip
        if kept is not None:
            kept.states = [kept.states[0], *(kept.states[n] for n in mapped)]
        x.cache["teacher"] = (h, kept)
    hidden, kept = x.cache["teacher"]
    return hidden, kept


def _teacher_outputs(model: nn.Module, x: Encoded) -> tuple[torch.Tensor, torch.Tensor]:
    """The teacher's last hidden states and MLM logits at the student's predicted
    positions [N, V]."""
    hidden, _ = _teacher_forward(model, x)
    if "teacher_logits" not in x.cache:
        with torch.no_grad():
            logits = teacher_of(model).mlm(hidden.flatten(0, 1).index_select(0, x.index))
        x.cache["teacher_logits"] = logits
    return hidden, x.cache["teacher_logits"]


@dataclass(frozen=True)
class SoftTargets:
    """DistilBERT's soft-target loss: KL to the teacher's softmax at temperature T, times T²,
    over the masked positions."""

    attribute: str | None = None

    def build(self, config: ModelConfig, word: nn.Embedding) -> None:
        return None

    def loss(self, model: nn.Module, x: Encoded, out: Outputs) -> torch.Tensor:
        _, teacher = _teacher_outputs(model, x)
        student = x.cache.get("mlm_logits")
        if student is None:
            student = model.mlm(x.flat.index_select(0, x.index))
        loss = soft_target_loss(student, teacher, getattr(model, TEMPERATURE))
        out["kd_loss"] = loss
        out["kd_count"] = torch.tensor(x.index.numel())
        return loss


@dataclass(frozen=True)
class HiddenCosine:
    """DistilBERT's cosine loss between the last hidden states at every real token."""

    attribute: str | None = None

    def build(self, config: ModelConfig, word: nn.Embedding) -> None:
        return None

    def loss(self, model: nn.Module, x: Encoded, out: Outputs) -> torch.Tensor:
        teacher, _ = _teacher_outputs(model, x)
        mask = x.batch["attention_mask"]
        loss = cosine_loss(x.h, teacher, mask)
        out["cos_loss"] = loss
        return loss


def _layers(model: nn.Module, x: Encoded) -> tuple[Kept, Kept]:
    """What the student's forward kept, and the teacher's mapped layers."""
    _, teacher = _teacher_forward(model, x)
    assert teacher is not None, "a part that reads the layers keeps the student's"
    return x.cache["kept"], teacher


@dataclass(frozen=True)
class HiddenStates:
    """TinyBERT's embedding and hidden-state loss: the sum over the student's embeddings
    (mapped to the teacher's) and layers of the MSE of the projected student states."""

    attribute: str | None = "fit"
    keeps: str = "states"

    def build(self, config: ModelConfig, word: nn.Embedding) -> nn.Module | None:
        width = config.teacher_width
        if width is None or width == config.hidden_size:
            return None
        return nn.Linear(config.hidden_size, width)

    def loss(self, model: nn.Module, x: Encoded, out: Outputs) -> torch.Tensor:
        student, teacher = _layers(model, x)
        loss = hidden_loss(student.states, teacher.states, model.fit)
        out["hid_loss"] = loss
        return loss


@dataclass(frozen=True)
class AttentionScores:
    """TinyBERT's attention loss: the sum over the student's layers of the MSE between its
    scores and those of the teacher layer mapped to it, head by head."""

    attribute: str | None = None
    keeps: str = "scores"

    def build(self, config: ModelConfig, word: nn.Embedding) -> None:
        return None

    def loss(self, model: nn.Module, x: Encoded, out: Outputs) -> torch.Tensor:
        student, teacher = _layers(model, x)
        loss = attention_loss(student.scores, teacher.scores)
        out["att_loss"] = loss
        return loss


KD = SoftTargets()
COS = HiddenCosine()
HID = HiddenStates()
ATT = AttentionScores()
