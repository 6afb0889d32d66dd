"""Each distillation loss term against a direct computation from its definition (float64
loops over positions, numpy), and against the expression the released code writes
(DistilBERT's `KLDivLoss(batchmean)` and `CosineEmbeddingLoss` on masked-selected rows),
on fixed random tensors; and the layer maps."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from clozeworks.trainer.distill.losses import (
    attention_loss,
    cosine_loss,
    every_other_layer,
    hidden_loss,
    soft_cross_entropy,
    soft_target_loss,
    uniform_layers,
)


def _logsoftmax(row: np.ndarray) -> np.ndarray:
    top = row.max()
    return row - top - math.log(np.exp(row - top).sum())


@pytest.mark.parametrize("temperature", [1.0, 2.0, 5.0])
def test_soft_target_loss_is_kl_times_t_squared(temperature) -> None:
    g = torch.Generator().manual_seed(0)
    s, t = torch.randn(7, 11, generator=g) * 3, torch.randn(7, 11, generator=g) * 3
    direct = 0.0
    for row_s, row_t in zip(s.double().numpy(), t.double().numpy(), strict=True):
        log_p, log_q = _logsoftmax(row_s / temperature), _logsoftmax(row_t / temperature)
        direct += sum(math.exp(b) * (b - a) for a, b in zip(log_p, log_q, strict=True))
    direct = direct / len(s) * temperature**2
    ours = soft_target_loss(s, t, temperature)
    assert ours.item() == pytest.approx(direct, rel=1e-5)
    released = (
        nn.KLDivLoss(reduction="batchmean")(
            torch.log_softmax(s / temperature, -1), torch.softmax(t / temperature, -1)
        )
        * temperature**2
    )
    assert ours.item() == pytest.approx(released.item(), rel=1e-5)
    assert soft_target_loss(t, t, temperature).item() == pytest.approx(0.0, abs=1e-6)


def test_cosine_loss_averages_one_minus_cos_over_real_tokens() -> None:
    g = torch.Generator().manual_seed(1)
    s, t = torch.randn(3, 5, 8, generator=g), torch.randn(3, 5, 8, generator=g)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    terms = []
    for b in range(3):
        for i in range(5):
            if mask[b, i]:
                a, c = s[b, i].double().numpy(), t[b, i].double().numpy()
                terms.append(1 - a @ c / (np.linalg.norm(a) * np.linalg.norm(c)))
    ours = cosine_loss(s, t, mask)
    assert ours.item() == pytest.approx(float(np.mean(terms)), rel=1e-5)
    keep = mask.bool().unsqueeze(-1).expand_as(s)
    rows_s, rows_t = s[keep].view(-1, 8), t[keep].view(-1, 8)
    released = nn.CosineEmbeddingLoss(reduction="mean")(rows_s, rows_t, torch.ones(len(rows_s)))
    assert ours.item() == pytest.approx(released.item(), rel=1e-5)


def test_soft_cross_entropy_is_tinyberts() -> None:
    g = torch.Generator().manual_seed(2)
    s, t = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
    for temperature in (1.0, 3.0):
        direct = 0.0
        for row_s, row_t in zip(s.double().numpy(), t.double().numpy(), strict=True):
            q = np.exp(_logsoftmax(row_t / temperature))
            direct -= float(q @ _logsoftmax(row_s / temperature))
        ours = soft_cross_entropy(s, t, temperature)
        assert ours.item() == pytest.approx(direct / len(s), rel=1e-5)


def test_attention_loss_counts_masked_scores_as_zero() -> None:
    g = torch.Generator().manual_seed(3)
    layers = []
    for _ in range(2):
        s, t = torch.randn(2, 3, 4, 4, generator=g), torch.randn(2, 3, 4, 4, generator=g)
        s[0, :, :, 3] -= 10000.0  # the mask's -10000 on the first row's last key
        t[0, :, :, 3] -= 10000.0
        layers.append((s, t))
    direct = 0.0
    for s, t in layers:
        a, b = s.double().numpy(), t.double().numpy()
        a = np.where(a <= -100, 0.0, a)
        b = np.where(b <= -100, 0.0, b)
        direct += float(((a - b) ** 2).mean())
    ours = attention_loss([s for s, _ in layers], [t for _, t in layers])
    assert ours.item() == pytest.approx(direct, rel=1e-5)
    assert ours.item() < 10.0  # the masked scores' -10000 left no trace


def test_hidden_loss_projects_the_student_to_the_teacher() -> None:
    g = torch.Generator().manual_seed(4)
    torch.manual_seed(4)
    project = nn.Linear(6, 10)
    student = [torch.randn(2, 5, 6, generator=g) for _ in range(3)]
    teacher = [torch.randn(2, 5, 10, generator=g) for _ in range(3)]
    w, bias = project.weight.detach().double().numpy(), project.bias.detach().double().numpy()
    direct = 0.0
    for s, t in zip(student, teacher, strict=True):
        projected = s.double().numpy() @ w.T + bias
        direct += float(((projected - t.double().numpy()) ** 2).mean())
    assert hidden_loss(student, teacher, project).item() == pytest.approx(direct, rel=1e-5)
    same = [torch.randn(2, 5, 10, generator=g)]
    assert hidden_loss(same, same).item() == 0.0


def test_layer_maps() -> None:
    # TinyBERT-4 from BERT-base: layers 3, 6, 9, 12; its code's 0-based attention indices
    # i*k + k - 1 and hidden-state indices i*k (the embeddings at 0) are the same layers.
    assert uniform_layers(4, 12) == [3, 6, 9, 12]
    assert [i * 3 + 3 - 1 for i in range(4)] == [m - 1 for m in uniform_layers(4, 12)]
    assert [i * 3 for i in range(5)] == [0, *uniform_layers(4, 12)]
    assert uniform_layers(6, 12) == [2, 4, 6, 8, 10, 12]
    with pytest.raises(ValueError, match="multiple of the student's 5"):
        uniform_layers(5, 12)
    # DistilBERT from BERT-base: extract_distilbert.py's layers.
    assert every_other_layer(12) == [0, 2, 4, 7, 9, 11]
    assert every_other_layer(4) == [0, 3]
    assert every_other_layer(24) == [0, 2, 4, 6, 8, 10, 13, 15, 17, 19, 21, 23]
    with pytest.raises(ValueError, match="even teacher depth"):
        every_other_layer(5)
