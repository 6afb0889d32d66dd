"""`cloze finetune --teacher`: TinyBERT's task-specific (prediction-layer) distillation. A
student fine-tuned on a teacher's soft predictions alone, never the gold labels, learns
the task; the loss is TinyBERT's soft cross-entropy (MSE for regression) on each shape;
a teacher of another task or tokenizer is refused in one line."""

from __future__ import annotations

import json

import pytest
import torch

from clozeworks.cli import main
from clozeworks.trainer.distill.losses import soft_cross_entropy
from clozeworks.trainer.finetune.train import teacher_loss
from tests.trainer.finetune.test_finetune_cli import write_sst2

FLAGS = ["--lr", "1e-3", "--epochs", "4", "--batch-size", "16", "--no-progress"]


@pytest.fixture(scope="module")
def sst2_teacher(tiny_run, tmp_path_factory):
    root = tmp_path_factory.mktemp("teacher")
    write_sst2(root / "sst2", seed=0, rows=240)
    args = ["finetune", "--run", str(tiny_run), "--task", "glue/sst2", "--data"]
    assert main([*args, str(root / "sst2"), "--output", str(root / "tuned"), *FLAGS]) == 0
    return root / "tuned", root / "sst2"


def test_a_student_learns_the_task_from_the_teachers_predictions(
    tiny_run, sst2_teacher, tmp_path
) -> None:
    teacher, data = sst2_teacher
    taught = json.loads((teacher / "finetune.json").read_text())["dev"]["accuracy"]
    args = ["finetune", "--run", str(tiny_run), "--task", "glue/sst2", "--data", str(data)]
    args += ["--random-init", "--teacher", str(teacher), "--output", str(tmp_path / "s")]
    assert main([*args, *FLAGS]) == 0
    info = json.loads((tmp_path / "s" / "finetune.json").read_text())
    assert info["settings"]["teacher"] == str(teacher)
    # From random weights, with no gold label seen, within 10 points of its teacher.
    assert info["dev"]["accuracy"] >= taught - 10.0, (info["epochs"], taught)
    assert info["dev"]["accuracy"] >= 80.0, info["epochs"]


def test_the_loss_is_tinyberts_on_every_shape() -> None:
    g = torch.Generator().manual_seed(0)
    s, t = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)
    labels = torch.zeros(4)
    for shape in ("single", "pair", "choice"):
        assert teacher_loss(s, t, labels, shape, 2.0) == soft_cross_entropy(s, t, 2.0)
    r_s, r_t = torch.randn(4, 1, generator=g), torch.randn(4, 1, generator=g)
    direct = ((r_s - r_t) ** 2).mean()
    assert teacher_loss(r_s, r_t, labels, "regression", 1.0).item() == pytest.approx(direct.item())
    tok_s, tok_t = torch.randn(2, 5, 3, generator=g), torch.randn(2, 5, 3, generator=g)
    tags = torch.tensor([[-100, 1, -100, 2, -100], [-100, 0, 0, -100, -100]])
    keep = tags != -100
    want = soft_cross_entropy(tok_s[keep], tok_t[keep], 1.0)
    assert teacher_loss(tok_s, tok_t, tags, "tokens", 1.0) == want
    qa_s, qa_t = torch.randn(2, 6, 2, generator=g), torch.randn(2, 6, 2, generator=g)
    halves = [soft_cross_entropy(qa_s[..., i], qa_t[..., i], 1.0) for i in (0, 1)]
    assert teacher_loss(qa_s, qa_t, torch.zeros(2, 2), "qa", 1.0) == (halves[0] + halves[1]) / 2


def test_a_teacher_of_another_task_is_one_line(tiny_run, sst2_teacher, tmp_path, capsys) -> None:
    from tests.trainer.finetune.test_finetune_cli import write_conll

    teacher, _ = sst2_teacher
    write_conll(tmp_path / "conll", seed=1, sentences=16)
    args = ["finetune", "--run", str(tiny_run), "--task", "conll2003", "--data"]
    args += [str(tmp_path / "conll"), "--teacher", str(teacher), "--output", str(tmp_path / "o")]
    capsys.readouterr()
    assert main([*args, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "fine-tuned for glue/sst2 (single" in err, err
    assert not (tmp_path / "o").exists()
