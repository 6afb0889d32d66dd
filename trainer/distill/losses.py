"""The loss terms of knowledge distillation as DistilBERT (Sanh et al. 2019) and TinyBERT
(Jiao et al. 2020) define them in their papers and released code, and the maps from a
student's layers to a teacher's.

DistilBERT (transformers' `examples/research_projects/distillation/distiller.py`):
- `soft_target_loss`: KL(teacher || student) of the softmaxes at temperature T, summed
  over the vocabulary and averaged over the predicted positions (`KLDivLoss(batchmean)`),
  times T² so its gradients keep their size as T grows (Hinton et al. 2015).
- `cosine_loss`: 1 - cos(student, teacher) of the last hidden states, averaged over the
  real (not padding) tokens (`CosineEmbeddingLoss` with target 1).
- The MLM loss is the student's own; DISTILBERT_WEIGHTS are the released training
  command's (`--alpha_ce 5.0 --alpha_mlm 2.0 --alpha_cos 1.0`).

TinyBERT (huawei-noah/Pretrained-Language-Model, `general_distill.py`,
`task_distill.py`):
- `attention_loss`: mean squared error of the attention scores before the softmax, a
  masked score (at most -100, where the mask added -10000) counted as 0.
- `hidden_loss`: mean squared error between the student's hidden states (embeddings
  output first), projected to the teacher's width by a learned linear map, and the
  teacher's.
- `soft_cross_entropy`: the prediction layer's: cross-entropy of the student's softmax
  against the teacher's, at temperature T (1 in TinyBERT).
- The uniform layer map: student layer m (1-based) learns from teacher layer m·N/M;
  the embeddings (layer 0) from the teacher's embeddings.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

# alpha_ce, alpha_mlm, alpha_cos of DistilBERT's released training command, by the
# objective's name (kd: the soft targets, cos: the hidden-state cosine).
DISTILBERT_WEIGHTS = {"kd": 5.0, "mlm": 2.0, "cos": 1.0}
DISTILBERT_TEMPERATURE = 2.0
# TinyBERT's code replaces scores at most this (the mask's -10000 added) by 0.
MASKED_SCORE = -1e2


def soft_target_loss(
    student: torch.Tensor, teacher: torch.Tensor, temperature: float
) -> torch.Tensor:
    """[N, V] logits of the same N positions -> KL(teacher_T || student_T) T², mean over N."""
    t = temperature
    log_p = F.log_softmax(student.float() / t, dim=-1)
    log_q = F.log_softmax(teacher.float() / t, dim=-1)
    kl = (log_q.exp() * (log_q - log_p)).sum(-1)  # [N]
    # No positions: a zero that still depends on the graph, not the NaN of a mean.
    return kl.sum() / max(kl.numel(), 1) * t * t


def cosine_loss(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, L, H] hidden states and the [B, L] attention mask -> mean of 1 - cos over the
    real tokens."""
    cos = F.cosine_similarity(student.float(), teacher.float(), dim=-1)  # [B, L]
    real = mask.float()
    return ((1.0 - cos) * real).sum() / real.sum().clamp(min=1)


def soft_cross_entropy(
    student: torch.Tensor, teacher: torch.Tensor, temperature: float
) -> torch.Tensor:
    """[N, C] logits -> -sum softmax(teacher/T) log softmax(student/T), mean over N."""
    targets = F.softmax(teacher.float() / temperature, dim=-1)
    return -(targets * F.log_softmax(student.float() / temperature, dim=-1)).sum(-1).mean()


def attention_loss(
    student: Sequence[torch.Tensor], teacher: Sequence[torch.Tensor]
) -> torch.Tensor:
    """The mapped layers' [B, heads, L, L] scores -> the sum over layers of their MSE."""
    total = torch.zeros((), device=student[0].device)
    for s, t in zip(student, teacher, strict=True):
        s, t = s.float(), t.float()
        s = torch.where(s <= MASKED_SCORE, torch.zeros_like(s), s)
        t = torch.where(t <= MASKED_SCORE, torch.zeros_like(t), t)
        total = total + F.mse_loss(s, t)
    return total


def hidden_loss(
    student: Sequence[torch.Tensor],
    teacher: Sequence[torch.Tensor],
    project: torch.nn.Module | None = None,
) -> torch.Tensor:
    """The mapped layers' [B, L, H] states (embeddings first) -> the sum over layers of the
    MSE between the projected student's and the teacher's."""
    total = torch.zeros((), device=student[0].device)
    for s, t in zip(student, teacher, strict=True):
        s = s if project is None else project(s)
        total = total + F.mse_loss(s.float(), t.float())
    return total


def uniform_layers(student_layers: int, teacher_layers: int) -> list[int]:
    """For each student layer 1..M, the teacher layer (1-based) it learns from: m·N/M."""
    if student_layers < 1 or teacher_layers % student_layers:
        raise ValueError(
            f"a uniform map needs the teacher's {teacher_layers} layers to be a multiple of "
            f"the student's {student_layers}"
        )
    step = teacher_layers // student_layers
    return [m * step for m in range(1, student_layers + 1)]


def every_other_layer(teacher_layers: int) -> list[int]:
    """The teacher layers (0-based) a DistilBERT student of half the depth starts from: one
    of two, as `extract_distilbert.py` takes them from BERT-base (0, 2, 4, 7, 9, 11): from
    the first layer up for the first half, down to the last layer for the second."""
    if teacher_layers < 2 or teacher_layers % 2:
        raise ValueError(f"a half-depth student needs an even teacher depth, not {teacher_layers}")
    half = teacher_layers // 2
    low = [2 * i for i in range((half + 1) // 2)]
    high = [teacher_layers - 1 - 2 * i for i in range(half // 2)][::-1]
    return low + high
