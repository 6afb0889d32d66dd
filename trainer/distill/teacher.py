"""The teacher of a distillation run: loaded from a run, a step directory or a
transformers directory, checked against the student, and the student's first weights
taken from it (DistilBERT: "initialize the student from the teacher by taking one layer
out of two", section 3).

A teacher must be an encoder with an MLM head over it (bert, roberta, albert, distilbert):
`kd` reads its MLM softmax, `cos` its last hidden states, which must then be as wide as
the student's.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from clozeworks.schemas.errors import UsageError
from clozeworks.trainer.config import ModelConfig, TrainConfig
from clozeworks.trainer.distill.losses import every_other_layer, uniform_layers
from clozeworks.trainer.pretraining import Pretraining


def load_teacher(path: str | Path) -> tuple[TrainConfig, nn.Module]:
    """The teacher's config and model (eval mode) from `path`."""
    from clozeworks.schemas.validate import read_json_object
    from clozeworks.trainer.export import load_run
    from clozeworks.trainer.families import (
        build_model,
        transformers_family,
        transformers_objectives,
    )
    from clozeworks.trainer.init_from import load_weights, locate, model_config

    src = locate(path)
    if src.kind == "run":
        if src.weights == src.path:  # a step directory
            run, step = src.path.parent, int(src.path.name.removeprefix("step-"))
        else:
            run, step = src.path, None
        config, model, _ = load_run(run, step)
    else:
        arch, _ = model_config(src.path, ModelConfig())
        family, _ = transformers_family(read_json_object(src.path / "config.json"), src.path)
        hf = read_json_object(src.path / "config.json")
        config = TrainConfig(model=arch, objectives=transformers_objectives(family, hf))
        model = build_model(config)
        load_weights(model, config, src.path)
    if not isinstance(model, Pretraining) or getattr(model, "mlm", None) is None:
        raise UsageError(
            f"--teacher {path}: a {config.model.family} model; a teacher needs an encoder with "
            "an MLM head over it (bert, roberta, albert or distilbert)"
        )
    return config, model.eval()


TEACHER_FILE = "teacher.json"


def fingerprint(path: str | Path) -> dict[str, str]:
    """The checkpoint `path` stands for now (a run: its newest) and the sha256 of its
    weights: what a resumed run must find again."""
    import hashlib

    from clozeworks.trainer.init_from import locate

    src = locate(path)
    weights = next(
        (src.weights / n for n in ("model.safetensors", "pytorch_model.bin")
         if (src.weights / n).is_file()),
        None,
    )  # fmt: skip
    digest = hashlib.sha256()
    if weights is not None:
        with weights.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return {"teacher": str(path), "checkpoint": str(src.weights), "sha256": digest.hexdigest()}


def check_same_teacher(run: Path, path: str) -> None:
    """On resume: UsageError unless `path` holds the weights the run started with (a
    teacher run that trained on, or other files, would change every later step)."""
    from clozeworks.schemas.validate import read_json_object

    record = run / TEACHER_FILE
    if not record.is_file():
        return
    was = read_json_object(record)
    now = fingerprint(path)
    if was.get("sha256") != now["sha256"]:
        raise UsageError(
            f"--teacher {path}: its weights ({now['checkpoint']}, {now['sha256'][:12]}) are not "
            f"the ones this run started from ({was.get('checkpoint')}, "
            f"{str(was.get('sha256'))[:12]}); pass --teacher {was.get('checkpoint')}"
        )


def check_teacher(path: str, teacher: ModelConfig, student: TrainConfig) -> None:
    """UsageError, in one line, where the student cannot learn from this teacher."""
    if teacher.vocab_size != student.model.vocab_size:
        raise UsageError(
            f"--teacher {path}: a vocabulary of {teacher.vocab_size}, the shards' has "
            f"{student.model.vocab_size}: the soft targets would be over other tokens"
        )
    if "cos" in student.objectives and teacher.hidden_size != student.model.hidden_size:
        raise UsageError(
            f"--teacher {path}: hidden size {teacher.hidden_size}, the student's is "
            f"{student.model.hidden_size}; cos compares hidden states of one width "
            "(--objective mlm,kd learns from the soft targets alone; hid projects)"
        )
    layered = [o for o in ("att", "hid") if o in student.objectives]
    s = student.model
    if layered and teacher.num_layers % s.num_layers:
        raise UsageError(
            f"--teacher {path}: {teacher.num_layers} layers; {' and '.join(layered)} map each "
            f"of the student's {s.num_layers} to one of the teacher's uniformly, so the "
            "teacher's depth must be a multiple of the student's"
        )
    if "att" in student.objectives and teacher.num_heads != s.num_heads:
        raise UsageError(
            f"--teacher {path}: {teacher.num_heads} attention heads, the student has "
            f"{s.num_heads}; att compares the scores head by head"
        )


def with_teacher_width(config: TrainConfig, teacher: ModelConfig) -> TrainConfig:
    """`config` whose student projects its states to the teacher's width for `hid`, where
    the widths differ."""
    width = teacher.hidden_size
    if "hid" not in config.objectives or width == config.model.hidden_size:
        width = None
    return replace(config, model=replace(config.model, teacher_width=width))


def init_student(student: Any, teacher: Any) -> str:
    """Copy the teacher's embeddings, MLM head and a chosen layer into each student layer
    where the shapes agree; a line saying what was taken."""
    s, t = student.config, teacher.config
    if (
        (s.hidden_size, s.embedding_width, s.max_position)
        != (
            t.hidden_size,
            t.embedding_width,
            t.max_position,
        )
        or s.intermediate_size != t.intermediate_size
        or s.share != "none"
        or t.share != "none"
    ):
        return "student initialized at random (its shapes are not the teacher's)"
    n, m = t.num_layers, s.num_layers
    if 2 * m == n:
        layers = every_other_layer(n)
    elif n % m == 0:
        layers = [k - 1 for k in uniform_layers(m, n)]
    else:
        return "student initialized at random (its depth does not divide the teacher's)"
    se, te = student.encoder.embeddings, teacher.encoder.embeddings
    with torch.no_grad():
        rows = min(se.word.num_embeddings, te.word.num_embeddings)
        se.word.weight[:rows].copy_(te.word.weight[:rows])
        se.position.weight.copy_(te.position.weight)
        se.norm.load_state_dict(te.norm.state_dict())
        if se.token_type is not None and te.token_type is not None:
            se.token_type.weight.copy_(te.token_type.weight[: se.token_type.num_embeddings])
        for mine, theirs in zip(student.encoder.layers, layers, strict=True):
            mine.load_state_dict(teacher.encoder.layers[theirs].state_dict())
        sm, tm = student.mlm, teacher.mlm
        sm.dense.load_state_dict(tm.dense.state_dict())
        sm.norm.load_state_dict(tm.norm.state_dict())
        sm.bias[:rows].copy_(tm.bias[:rows])
    return f"student initialized from the teacher's embeddings, MLM head and layers {layers}"
