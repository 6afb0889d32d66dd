"""`cloze train --teacher`: a DistilBERT student learns from a teacher run with the triple
loss (mlm, kd, cos), starts from every other teacher layer, computes each loss term as the
definitions do on a fixed batch, resumes bit-identically, exports as DistilBertForMaskedLM,
and refuses a teacher it cannot learn from in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from clozeworks.cli import main
from clozeworks.trainer.config import TrainConfig
from clozeworks.trainer.distill import losses
from clozeworks.trainer.distill.parts import attach
from clozeworks.trainer.distill.teacher import init_student, load_teacher
from clozeworks.trainer.export import load_run
from clozeworks.trainer.families import build_model
from tests.trainer.distill.conftest import write as _write

STUDENT = (
    '[model]\nfamily = "distilbert"\nhidden_size = 32\nnum_layers = 2\nnum_heads = 2\n'
    "intermediate_size = 64\ntype_vocab_size = 0\n[optim]\nwarmup_steps = 1\n"
)


def _student_args(shards_dir, teacher_run, run: Path, tmp_path: Path) -> list[str]:
    args = ["train", "--data", str(shards_dir), "--output", str(run), "--teacher", str(teacher_run)]
    args += ["--config", _write(tmp_path / "s.toml", STUDENT), "--batch-size", "8"]
    return [*args, "--save-every", "2", "--log-every", "1", "--no-progress"]


def test_a_student_trains_with_the_triple_loss_and_exports(
    shards_dir, teacher_run, tmp_path, capsys
) -> None:
    run = tmp_path / "run"
    assert main([*_student_args(shards_dir, teacher_run, run, tmp_path), "--max-steps", "4"]) == 0
    err = capsys.readouterr().err
    assert "objectives: mlm,kd,cos" in err
    assert "student initialized from the teacher's embeddings, MLM head and layers [0, 3]" in err
    config = json.loads((run / "config.json").read_text())
    assert config["objectives"] == ["mlm", "kd", "cos"] and config["teacher"] == str(teacher_run)
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert all({"mlm_loss", "kd_loss", "cos_loss"} <= set(line) for line in lines)
    assert main(["export", "--run", str(run), "--output", str(tmp_path / "hf")]) == 0
    exported = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert exported["architectures"] == ["DistilBertForMaskedLM"]
    # The teacher is no part of the student's checkpoint.
    from safetensors import safe_open

    step = sorted(run.glob("step-*"))[-1]
    with safe_open(str(step / "model.safetensors"), "pt") as f:
        keys = list(f.keys())
    assert not any("teacher" in k for k in keys)


def test_the_student_starts_from_every_other_teacher_layer(teacher_run) -> None:
    teacher_config, teacher = load_teacher(teacher_run)
    config = TrainConfig.from_dict(
        {"model": {"family": "distilbert", "hidden_size": 32, "num_layers": 2, "num_heads": 2,
                   "intermediate_size": 64, "type_vocab_size": 0,
                   "vocab_size": teacher_config.model.vocab_size}}
    )  # fmt: skip
    student = build_model(config)
    assert "layers [0, 3]" in init_student(student, teacher)
    for mine, theirs in zip(student.encoder.layers, [0, 3], strict=True):
        a, b = mine.state_dict(), teacher.encoder.layers[theirs].state_dict()
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert torch.equal(
        student.encoder.embeddings.word.weight, teacher.encoder.embeddings.word.weight
    )
    assert torch.equal(student.mlm.bias, teacher.mlm.bias)


def test_each_loss_term_is_its_definition_on_a_fixed_batch(teacher_run) -> None:
    teacher_config, teacher = load_teacher(teacher_run)
    config = TrainConfig.from_dict(
        {"model": {"family": "distilbert", "hidden_size": 32, "num_layers": 2, "num_heads": 2,
                   "intermediate_size": 64, "type_vocab_size": 0,
                   "vocab_size": teacher_config.model.vocab_size},
         "objectives": ["mlm", "kd", "cos"], "teacher": str(teacher_run), "temperature": 3.0}
    )  # fmt: skip
    student = build_model(config).eval()
    attach(student, teacher, 3.0)
    assert student.loss_weights == {"mlm": 2.0, "kd": 5.0, "cos": 1.0}
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 500, (3, 16), generator=g)
    mask = torch.ones_like(ids)
    mask[2, 10:] = 0
    labels = torch.full_like(ids, -100)
    labels[:, 3] = ids[:, 3]
    labels[1, 7] = ids[1, 7]
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels,
             "token_type_ids": torch.zeros_like(ids)}  # fmt: skip
    with torch.no_grad():
        out = student(batch)
        where = labels != -100
        s_h = student.encoder(ids, mask, None)
        t_h = teacher.encoder(ids, mask, torch.zeros_like(ids))
        s_logits, t_logits = student.mlm(s_h[where]), teacher.mlm(t_h[where])
    mlm = torch.nn.functional.cross_entropy(s_logits, labels[where])
    kd = losses.soft_target_loss(s_logits, t_logits, 3.0)
    cos = 1 - torch.nn.functional.cosine_similarity(s_h[mask.bool()], t_h[mask.bool()], dim=-1)
    assert out["mlm_loss"].item() == pytest.approx(mlm.item(), rel=1e-5)
    assert out["kd_loss"].item() == pytest.approx(kd.item(), rel=1e-5)
    assert out["cos_loss"].item() == pytest.approx(cos.mean().item(), rel=1e-5)
    assert [p for p in student.parameters() if p is teacher.mlm.bias] == []


def test_a_resumed_distillation_ends_bit_identical(shards_dir, teacher_run, tmp_path) -> None:
    """What a kill -9 after step 4's checkpoint leaves, resumed: the teacher is loaded
    again, the student's weights, optimizer and data position come from the checkpoint."""
    import shutil

    whole, broken = tmp_path / "whole", tmp_path / "broken"
    assert main([*_student_args(shards_dir, teacher_run, whole, tmp_path), "--max-steps", "6"]) == 0
    broken.mkdir()
    shutil.copytree(whole / "step-0000004", broken / "step-0000004")
    for name in ("metrics.jsonl", "config.json"):
        shutil.copy(whole / name, broken / name)
    args = _student_args(shards_dir, teacher_run, broken, tmp_path)
    assert main([*args, "--max-steps", "6", "--resume"]) == 0
    _, a, _ = load_run(whole)
    _, b, _ = load_run(broken)
    sa, sb = a.state_dict(), b.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)


def test_a_teacher_that_cannot_teach_is_one_line(shards_dir, teacher_run, tmp_path, capsys) -> None:
    wide = STUDENT.replace("hidden_size = 32", "hidden_size = 64")
    args = ["train", "--data", str(shards_dir), "--output", str(tmp_path / "r")]
    args += ["--teacher", str(teacher_run), "--config", _write(tmp_path / "w.toml", wide)]
    capsys.readouterr()
    assert main([*args, "--max-steps", "2", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert [line for line in err if "error" in line] == err[-1:], err
    assert "cos compares hidden states of one width" in err[-1] and "Traceback" not in err
    assert not (tmp_path / "r").exists()  # refused before anything was written
    plain = ["train", "--data", str(shards_dir), "--output", str(tmp_path / "p")]
    assert main([*plain, "--objective", "mlm,kd", "--max-steps", "2", "--warmup", "1"]) == 2
    assert "kd learn from a teacher: give --teacher" in capsys.readouterr().err


def test_resuming_with_other_teacher_weights_is_refused(
    shards_dir, teacher_run, tmp_path, capsys
) -> None:
    """The run records the teacher checkpoint and its weights' sha256; a resume that finds
    other weights there (here: the teacher's export, other files) stops in one line."""
    run = tmp_path / "run"
    args = _student_args(shards_dir, teacher_run, run, tmp_path)
    assert main([*args, "--max-steps", "2"]) == 0
    record = json.loads((run / "teacher.json").read_text())
    assert record["checkpoint"].endswith("step-0000020") and len(record["sha256"]) == 64
    assert main(["export", "--run", str(teacher_run), "--output", str(tmp_path / "hf")]) == 0
    other = [a if a != str(teacher_run) else str(tmp_path / "hf") for a in args]
    capsys.readouterr()
    assert main([*other, "--max-steps", "4", "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "are not the ones this run started from" in err[-1], err
    assert f"pass --teacher {record['checkpoint']}" in err[-1]


def test_two_processes_distil_as_one_process_with_two_micro_batches(
    shards_dir, teacher_run, tmp_path
) -> None:
    """torchrun on the CPU (gloo): each rank runs the teacher on its own batch; the student
    ends where one process ends with the two ranks' batches as two micro-batches (kd's and
    cos's losses normalized by their counts over the global batch)."""
    from safetensors.torch import load_file

    from tests.trainer.test_ddp import torchrun, two_ranks_in_one_process

    settings = STUDENT.replace("[optim]", "dropout = 0.0\nattention_dropout = 0.0\n[optim]")
    config_file = tmp_path / "ddp.toml"
    config_file.write_text(
        'device = "cpu"\nbatch_size = 4\nmax_steps = 4\nsave_every = 4\nshuffle_buffer = 64\n'
        f'tensorboard = false\nteacher = "{teacher_run}"\nobjectives = ["mlm", "kd", "cos"]\n'
        + settings,
        encoding="utf-8",
    )
    run = tmp_path / "run"
    args = ["--data", str(shards_dir), "--output", str(run), "--config", str(config_file)]
    done = torchrun(2, [*args, "--no-progress"])
    assert done.returncode == 0, done.stderr[-3000:]
    reference, _ = two_ranks_in_one_process(config_file, shards_dir, 4, tmp_path)
    ddp = load_file(run / "step-0000004" / "model.safetensors")
    ours = reference.model.state_dict()
    for name, tensor in ddp.items():
        assert torch.allclose(tensor, ours[name], atol=1e-5, rtol=1e-4), name
