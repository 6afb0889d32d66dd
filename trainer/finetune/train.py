"""Fine-tuning a SequenceModel on one task, BERT's recipe: AdamW (weight decay 0.01, not on
biases and LayerNorms), linear warm-up over the first 10% of steps and linear decay to 0,
batch 32, 3 epochs, dropout 0.1, gradient norm clipped at 1 (BERT section 4 and appendix
A.3; transformers' `Trainer` defaults). The dev split is scored after every epoch.

Everything a run depends on is the seed: the head's initialization, the order of
examples in each epoch, dropout.
"""

from __future__ import annotations

import json
import math
import random
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from clozeworks.corpus.progress import progress_bar
from clozeworks.schemas.errors import SettingError
from clozeworks.schemas.settings import DEFAULT_SEED, SEEDS, check_at_least, check_choices, setting
from clozeworks.trainer.distill.losses import soft_cross_entropy
from clozeworks.trainer.finetune import klue_metrics, metrics
from clozeworks.trainer.finetune.encoded import Encoded
from clozeworks.trainer.finetune.klue_ner import klue_ner_scores
from clozeworks.trainer.finetune.model import TaskModel, task_loss
from clozeworks.trainer.finetune.qa import qa_scores
from clozeworks.trainer.finetune.tasks import TaskSpec
from clozeworks.trainer.finetune.tokens import token_scores
from clozeworks.trainer.models.bert import decay_groups


@dataclass(frozen=True)
class Recipe:
    """The learning rate, batch and epochs of a fine-tuning recipe, and the learning rates
    `--sweep` tries."""

    learning_rate: float
    batch_size: int
    epochs: int
    sweep: tuple[float, ...]


# BERT's recipe (section 4.1 and A.3) is for BERT-base and -large; at its 2e-5 for 3 epochs
# a model of 2 layers learns nothing (the majority class). BERT's 24 smaller models (Turc et
# al. 2019, hidden 128-512) were tuned on GLUE's thousands of examples for 4 epochs at 3e-4
# to 3e-5 (google-research/bert's README); on a few hundred examples a 2-layer model stays
# at chance after 4 epochs at 3e-4 and learns at 5e-4 over 10 (the demo's probe, and
# tests/trainer/finetune/test_recipes.py).
RECIPES = {
    "bert": Recipe(2e-5, 32, 3, (5e-5, 4e-5, 3e-5, 2e-5)),
    "small": Recipe(5e-4, 16, 10, (1e-3, 5e-4, 3e-4, 1e-4)),
}
RecipeName = Literal["auto", "bert", "small"]
# `auto` takes the small recipe up to the smaller models' largest hidden size (BERT-base's
# is 768).
SMALL_HIDDEN_SIZE = 512


def recipe_for(name: str, hidden_size: int) -> str:
    """The recipe `name` stands for with a model of `hidden_size`."""
    if name != "auto":
        return name
    return "small" if hidden_size <= SMALL_HIDDEN_SIZE else "bert"


@dataclass(frozen=True)
class FinetuneSettings:
    # None: the recipe's (`resolved`); the recipe `auto` picks by the model's size.
    recipe: RecipeName = setting(
        "auto",
        "learning rate, batch and epochs: bert (2e-5, 32, 3: BERT-base and -large), small "
        "(5e-4, 16, 10: models up to hidden size 512) or auto (by the model's hidden size); "
        "--lr, --batch-size, --epochs override",
    )
    learning_rate: float | None = setting(
        None, "peak learning rate (default: the recipe's)", flag="lr"
    )
    batch_size: int | None = setting(None, "examples per step (default: the recipe's)")
    epochs: int | None = setting(None, "passes over train (default: the recipe's)")
    warmup: float = setting(0.1, "share of steps warming up")
    weight_decay: float = setting(0.01, "AdamW decay")
    max_grad_norm: float = 1.0
    max_seq_len: int = setting(
        128, "tokens per example (per window for question answering; BERT used 384 there)"
    )
    seed: int = setting(DEFAULT_SEED, "head init, order and dropout", bounds=SEEDS)
    eval_batch_size: int = 128
    device: str = setting("auto", "auto, cpu, cuda, cuda:N")
    # TinyBERT's second stage (Jiao et al. 2020, task-specific distillation): the student
    # learns the teacher's predictions instead of the gold labels.
    teacher: str | None = setting(
        None,
        "a fine-tuned model of this task (same tokenizer) whose soft predictions replace the "
        "gold labels: TinyBERT's prediction-layer distillation",
        metavar="DIR",
    )
    temperature: float = setting(1.0, "softmax temperature of the teacher's predictions")

    def __post_init__(self) -> None:
        check_choices(self)
        if self.learning_rate is not None and not self.learning_rate > 0:
            raise SettingError("learning_rate", f"must be > 0, got {self.learning_rate}")
        if self.batch_size is not None:
            check_at_least("batch_size", self.batch_size, 1)
        if self.epochs is not None:
            check_at_least("epochs", self.epochs, 1)
        if not 0.0 <= self.warmup < 1.0:
            raise SettingError("warmup", f"is a share of the steps in [0, 1), got {self.warmup}")
        if self.max_seq_len < 8:
            raise SettingError("max_seq_len", f"must be at least 8, got {self.max_seq_len}")
        if not self.temperature > 0:
            raise SettingError("temperature", f"must be > 0, got {self.temperature}")

    def resolved(self, hidden_size: int) -> FinetuneSettings:
        """These settings with the recipe named and its values where none is given."""
        name = recipe_for(self.recipe, hidden_size)
        recipe = RECIPES[name]
        return replace(
            self,
            recipe=name,  # type: ignore[arg-type]
            learning_rate=self.learning_rate or recipe.learning_rate,
            batch_size=self.batch_size or recipe.batch_size,
            epochs=self.epochs or recipe.epochs,
        )

    @property
    def lr(self) -> float:
        return _given(self.learning_rate, "learning_rate")

    @property
    def batch(self) -> int:
        return _given(self.batch_size, "batch_size")

    @property
    def passes(self) -> int:
        return _given(self.epochs, "epochs")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def epoch_line(record: dict[str, Any], epochs: int) -> str:
    """`epoch 2/3: train loss 0.4123, dev {"accuracy": 81.5}` (by task for several)."""
    parts = []
    for name, loss in record["train_loss_by_task"].items():
        dev = record.get("dev_by_task", {}).get(name)
        scores = (
            "" if dev is None else ", dev " + json.dumps({k: round(v, 2) for k, v in dev.items()})
        )
        label = f"{name} " if len(record["train_loss_by_task"]) > 1 else ""
        parts.append(f"{label}train loss {loss:.4f}{scores}")
    return f"epoch {record['epoch']}/{epochs}: " + "; ".join(parts)


def _say(line: str) -> None:
    """A line on stderr now, above a progress bar if one is drawn, and not held in a
    buffer when stderr is a file (a log read while the run goes on)."""
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)
    sys.stderr.flush()


def _given(value: Any, name: str) -> Any:
    if value is None:
        raise ValueError(f"{name} is the recipe's until the settings are resolved")
    return value


def batches(
    data: Encoded, size: int, order: Sequence[int], pad_id: int, device: torch.device
) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor]]:
    """Padded to the longest row of each batch."""
    for start in range(0, len(order), size):
        yield make_batch(data, order[start : start + size], pad_id, device)


def make_batch(
    data: Encoded, rows: Sequence[int], pad_id: int, device: torch.device
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    lines = [line for i in rows for line in data.rows(i)]
    length = max(len(data.ids[i]) for i in lines)
    ids = torch.full((len(lines), length), pad_id, dtype=torch.long)
    types = torch.zeros((len(lines), length), dtype=torch.long)
    mask = torch.zeros((len(lines), length), dtype=torch.long)
    for r, i in enumerate(lines):
        n = len(data.ids[i])
        ids[r, :n] = torch.as_tensor(data.ids[i])
        types[r, :n] = torch.as_tensor(data.types[i])
        mask[r, :n] = 1
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    if data.choices:  # [B, C, L]: an example's options side by side
        batch = {k: v.view(len(rows), data.choices, length) for k, v in batch.items()}
    if data.piece_labels is None:
        labels = torch.from_numpy(data.labels[list(rows)])
    else:
        labels = torch.full((len(rows), length), -100, dtype=torch.long)
        for r, i in enumerate(rows):
            labels[r, : len(data.piece_labels[i])] = torch.tensor(data.piece_labels[i])
    return {k: v.to(device) for k, v in batch.items()}, labels.to(device)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _inputs(model: TaskModel, batch: dict[str, torch.Tensor]) -> tuple[Any, ...]:
    types = batch["token_type_ids"] if model.config.type_vocab_size else None
    return batch["input_ids"], batch["attention_mask"], types


@torch.no_grad()
def predict(model: TaskModel, data: Encoded, batch_size: int, pad_id: int) -> list[np.ndarray]:
    """Each example's logits, in example order: [C], or [pieces, C] for a token task."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    # Sorted by length so each batch pads little; put back in order afterwards.
    order = sorted(range(data.size), key=data.length)
    out: list[np.ndarray] = [np.zeros(0)] * len(order)
    position = 0
    for batch, _ in batches(data, batch_size, order, pad_id, device):
        logits = model(*_inputs(model, batch)).float().cpu().numpy()  # [B, C] or [B, L, C]
        for r, row in enumerate(logits):
            i = order[position + r]
            out[i] = row[: len(data.ids[i])] if row.ndim == 2 else row
        position += len(logits)
    model.train(was_training)
    return out


def score(spec: TaskSpec, outputs: list[np.ndarray], data: Encoded) -> dict[str, float]:
    """The task's metrics, in percent (as GLUE, SQuAD and conlleval report them)."""
    if spec.shape == "tokens":
        return TOKEN_SCORES[spec.format](spec, outputs, data)
    if spec.shape == "qa":
        return qa_scores(spec, outputs, data)
    logits = np.stack(outputs)  # [N, C]
    labels = data.labels
    if spec.shape == "regression":
        predicted = logits[:, 0]
        return {name: REGRESSION[name](predicted, labels) for name in spec.metrics}
    gold = labels.astype(np.int64)
    return {name: CLASSIFICATION[name](logits, gold, spec.labels) for name in spec.metrics}


def _f1(logits: np.ndarray, gold: np.ndarray, labels: tuple[str, ...]) -> float:
    return 100.0 * metrics.f1_binary(logits.argmax(axis=1), gold)


def _f1_macro(logits: np.ndarray, gold: np.ndarray, labels: tuple[str, ...]) -> float:
    """The mean F1 over every class of the task's label set."""
    classes = logits.argmax(axis=1)
    scores = [metrics.f1_binary(classes, gold, c) for c in range(len(labels))]
    return 100.0 * float(np.mean(scores))


def _accuracy(logits: np.ndarray, gold: np.ndarray, labels: tuple[str, ...]) -> float:
    return 100.0 * metrics.accuracy(logits.argmax(axis=1), gold)


def _matthews(logits: np.ndarray, gold: np.ndarray, labels: tuple[str, ...]) -> float:
    return 100.0 * metrics.matthews(logits.argmax(axis=1), gold)


def _klue_macro_f1(logits: np.ndarray, gold: np.ndarray, labels: tuple[str, ...]) -> float:
    return klue_metrics.ynat_macro_f1(logits.argmax(axis=1), gold)


def _klue_re_f1(logits: np.ndarray, gold: np.ndarray, labels: tuple[str, ...]) -> float:
    none = labels.index("no_relation")
    return klue_metrics.re_micro_f1(logits.argmax(axis=1), gold, len(labels), none)


def _klue_re_auprc(logits: np.ndarray, gold: np.ndarray, labels: tuple[str, ...]) -> float:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return klue_metrics.re_auprc(shifted / shifted.sum(axis=1, keepdims=True), gold)


def _pearson(predicted: np.ndarray, gold: np.ndarray) -> float:
    return 100.0 * metrics.pearson(predicted, gold)


def _spearman(predicted: np.ndarray, gold: np.ndarray) -> float:
    return 100.0 * metrics.spearman(predicted, gold)


# Each metric of a task, in percent, by name (tasks.py lists which shape takes which).
# A classification metric takes the logits [N, C], the gold classes and the label names.
CLASSIFICATION: dict[str, Callable[[np.ndarray, np.ndarray, tuple[str, ...]], float]] = {
    "accuracy": _accuracy,
    "f1": _f1,
    "f1_macro": _f1_macro,
    "matthews": _matthews,
    "klue_macro_f1": _klue_macro_f1,
    "klue_re_f1": _klue_re_f1,
    "klue_re_auprc": _klue_re_auprc,
}
REGRESSION: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "pearson": _pearson,
    "spearman": _spearman,
    "klue_sts_f1": klue_metrics.sts_f1,
}


# A token task's scorer by its files' format (tasks.TOKEN_FORMATS).
TOKEN_SCORES: dict[str, Callable[[TaskSpec, list[np.ndarray], Encoded], dict[str, float]]] = {
    "conll": token_scores,
    "klue_ner": klue_ner_scores,
}


@dataclass
class History:
    epochs: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    train_examples: int = 0
    seconds: float = 0.0


@dataclass
class TaskRun:
    """One task of a (multi-task) fine-tuning: its model shares the encoder with the others;
    with a teacher (a fine-tuned model of the task), the model learns its predictions."""

    spec: TaskSpec
    model: TaskModel
    train: Encoded
    dev: Encoded | None = None
    teacher: TaskModel | None = None


def teacher_loss(
    student: torch.Tensor,
    teacher: torch.Tensor,
    labels: torch.Tensor,
    shape: str,
    temperature: float,
) -> torch.Tensor:
    """TinyBERT's prediction-layer loss on a batch: the soft cross-entropy of the student's
    softmax against the teacher's at `temperature` (over the options for multiple choice,
    over the labelled pieces for a token task, over the positions for the answer's start
    and end), or the mean squared error to the teacher's score for regression (TinyBERT's
    task_distill.py)."""
    if shape == "regression":
        return F.mse_loss(student.squeeze(-1).float(), teacher.squeeze(-1).float())
    if shape == "tokens":
        keep = labels != -100  # [B, L]
        return soft_cross_entropy(student[keep], teacher[keep], temperature)
    if shape == "qa":
        start = soft_cross_entropy(student[..., 0], teacher[..., 0], temperature)
        end = soft_cross_entropy(student[..., 1], teacher[..., 1], temperature)
        return (start + end) / 2
    return soft_cross_entropy(student, teacher, temperature)


def finetune(
    model: TaskModel,
    spec: TaskSpec,
    train: Encoded,
    dev: Encoded | None,
    settings: FinetuneSettings,
    pad_id: int,
    progress: bool = False,
    teacher: TaskModel | None = None,
) -> History:
    """Trains `model` in place (on `teacher`'s predictions when given); returns the
    per-epoch losses and dev scores."""
    run = TaskRun(spec, model, train, dev, teacher)
    history = finetune_tasks([run], settings, pad_id, progress)
    for record in history.epochs:  # one task: its scores without the task's name
        record["train_loss"] = record.pop("train_loss_by_task")[spec.name]
        if "dev_by_task" in record:
            record["dev"] = record.pop("dev_by_task")[spec.name]
    return history


def finetune_tasks(
    runs: Sequence[TaskRun], settings: FinetuneSettings, pad_id: int, progress: bool = False
) -> History:
    """Trains the tasks' models (one shared encoder, a head each) in place. Each epoch takes
    every batch of every task once, in one shuffled order, so a task is sampled in
    proportion to its size (MT-DNN, Liu et al. 2019, algorithm 1); with one task this is
    plain fine-tuning."""
    import time

    device = pick_device(settings.device)
    torch.manual_seed(settings.seed)
    # One module holding every task model: a shared encoder's parameters appear once.
    models = nn.ModuleList([r.model for r in runs]).to(device).train()
    for run in runs:  # frozen, without dropout, outside the optimized modules
        if run.teacher is not None:
            run.teacher.to(device).eval().requires_grad_(False)
    rng = random.Random(settings.seed)
    per_epoch = sum(math.ceil(r.train.size / settings.batch) for r in runs)
    total = per_epoch * settings.passes
    warmup = int(total * settings.warmup)
    optimizer = torch.optim.AdamW(
        decay_groups(models, settings.weight_decay),
        lr=settings.lr,
        betas=(0.9, 0.999),
        eps=1e-6,
    )

    def linear(step: int) -> float:
        if step < warmup:
            return step / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, linear)
    history = History()
    start = time.perf_counter()
    names = ", ".join(r.spec.name for r in runs)
    bar = progress_bar(total, f"finetune {names}", "step", progress)
    for epoch in range(settings.passes):
        plan: list[tuple[int, list[int]]] = []
        for t, run in enumerate(runs):
            order = list(range(run.train.size))
            rng.shuffle(order)
            size = settings.batch
            plan += [(t, order[i : i + size]) for i in range(0, len(order), size)]
        if len(runs) > 1:
            rng.shuffle(plan)
        losses: list[list[float]] = [[] for _ in runs]
        for t, rows in plan:
            run = runs[t]
            batch, labels = make_batch(run.train, rows, pad_id, device)
            logits = run.model(*_inputs(run.model, batch))
            if run.teacher is None:
                loss = task_loss(logits, labels, run.spec.shape)
            else:
                with torch.no_grad():
                    taught = run.teacher(*_inputs(run.teacher, batch))
                loss = teacher_loss(logits, taught, labels, run.spec.shape, settings.temperature)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(models.parameters(), settings.max_grad_norm)
            optimizer.step()
            schedule.step()
            losses[t].append(loss.item())
            history.steps += 1
            bar.update()
            bar.set_postfix(loss=f"{losses[t][-1]:.4f}")
        history.train_examples += sum(r.train.size for r in runs)
        record: dict[str, Any] = {
            "epoch": epoch + 1,
            "train_loss_by_task": {
                r.spec.name: float(np.mean(losses[t])) for t, r in enumerate(runs)
            },
        }
        scored = {
            r.spec.name: score(
                r.spec, predict(r.model, r.dev, settings.eval_batch_size, pad_id), r.dev
            )
            for r in runs
            if r.dev is not None
        }
        if scored:
            record["dev_by_task"] = scored
        history.epochs.append(record)
        _say(epoch_line(record, settings.passes))
    bar.close()
    history.seconds = time.perf_counter() - start
    models.eval()
    return history
