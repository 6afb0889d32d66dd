"""Fine-tuning a SequenceModel on one task, BERT's recipe: AdamW (weight decay 0.01, not on
biases and LayerNorms), linear warm-up over the first 10% of steps and linear decay to 0,
batch 32, 3 epochs, dropout 0.1, gradient norm clipped at 1 (BERT section 4 and appendix
A.3; transformers' `Trainer` defaults). The dev split is scored after every epoch.

Everything a run depends on is the seed: the head's initialization, the order of
examples in each epoch, dropout.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer
from tqdm import tqdm

from clozeworks.schemas.errors import UsageError
from clozeworks.trainer.finetune import metrics
from clozeworks.trainer.finetune.model import SequenceModel, task_loss
from clozeworks.trainer.finetune.readers import Example
from clozeworks.trainer.finetune.tasks import TaskSpec
from clozeworks.trainer.models.bert import decay_groups


@dataclass(frozen=True)
class FinetuneSettings:
    learning_rate: float = 2e-5
    batch_size: int = 32
    epochs: int = 3
    warmup: float = 0.1  # share of all steps
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    max_seq_len: int = 128
    seed: int = 0
    eval_batch_size: int = 128
    device: str = "auto"

    def __post_init__(self) -> None:
        if not self.learning_rate > 0 or self.batch_size < 1 or self.epochs < 1:
            raise UsageError("--lr must be > 0, --batch-size and --epochs at least 1")
        if not 0.0 <= self.warmup < 1.0:
            raise UsageError(f"--warmup is a share of the steps in [0, 1), got {self.warmup}")
        if self.max_seq_len < 8:
            raise UsageError(f"--max-seq-len must be at least 8, got {self.max_seq_len}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Encoded:
    """Token ids of a split, one row per example, with labels."""

    ids: list[list[int]]
    types: list[list[int]]
    labels: np.ndarray  # float64 [N]
    truncated: int = 0


def encode(tokenizer: Tokenizer, examples: Sequence[Example], max_len: int) -> Encoded:
    """[CLS] a [SEP] (b [SEP]) as the tokenizer's template makes them, cut to `max_len` by
    trimming the longer text first (BERT's `_truncate_seq_pair`)."""
    tok = Tokenizer.from_str(tokenizer.to_str())  # truncation settings stay local
    tok.no_padding()
    tok.enable_truncation(max_len, strategy="longest_first")
    inputs: list[Any] = [e.text_a if e.text_b is None else (e.text_a, e.text_b) for e in examples]
    out = tok.encode_batch(inputs)
    truncated = sum(bool(e.overflowing) for e in out)
    return Encoded(
        [e.ids for e in out],
        [e.type_ids for e in out],
        np.array([e.label for e in examples], dtype=np.float64),
        truncated,
    )


def batches(
    data: Encoded, size: int, order: Sequence[int], pad_id: int, device: torch.device
) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor]]:
    """Padded to the longest row of each batch."""
    for start in range(0, len(order), size):
        rows = order[start : start + size]
        length = max(len(data.ids[i]) for i in rows)
        ids = torch.full((len(rows), length), pad_id, dtype=torch.long)
        types = torch.zeros((len(rows), length), dtype=torch.long)
        mask = torch.zeros((len(rows), length), dtype=torch.long)
        for r, i in enumerate(rows):
            n = len(data.ids[i])
            ids[r, :n] = torch.tensor(data.ids[i])
            types[r, :n] = torch.tensor(data.types[i])
            mask[r, :n] = 1
        batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        labels = torch.from_numpy(data.labels[list(rows)])
        yield {k: v.to(device) for k, v in batch.items()}, labels.to(device)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _inputs(model: SequenceModel, batch: dict[str, torch.Tensor]) -> tuple[Any, ...]:
    types = batch["token_type_ids"] if model.config.type_vocab_size else None
    return batch["input_ids"], batch["attention_mask"], types


@torch.no_grad()
def predict(model: SequenceModel, data: Encoded, batch_size: int, pad_id: int) -> np.ndarray:
    """Logits [N, C] in example order."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    # Sorted by length so each batch pads little; put back in order afterwards.
    order = sorted(range(len(data.ids)), key=lambda i: len(data.ids[i]))
    out = np.zeros((len(order), model.head.out.out_features), dtype=np.float32)
    position = 0
    for batch, _ in batches(data, batch_size, order, pad_id, device):
        logits = model(*_inputs(model, batch)).float().cpu().numpy()
        out[order[position : position + len(logits)]] = logits
        position += len(logits)
    model.train(was_training)
    return out


def score(spec: TaskSpec, logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The task's metrics (GLUE reports them in percent for classification, as here)."""
    out: dict[str, float] = {}
    if spec.shape == "regression":
        predicted = logits[:, 0]
        for name in spec.metrics:
            fn: Callable[..., float] = getattr(metrics, name)
            out[name] = 100.0 * fn(predicted, labels)
        return out
    classes = logits.argmax(axis=1)
    gold = labels.astype(np.int64)
    for name in spec.metrics:
        if name == "f1":
            out[name] = 100.0 * metrics.f1_binary(classes, gold)
        elif name == "f1_macro":
            out[name] = 100.0 * float(
                np.mean([metrics.f1_binary(classes, gold, c) for c in range(len(spec.labels))])
            )
        else:
            out[name] = 100.0 * getattr(metrics, name)(classes, gold)
    return out


@dataclass
class History:
    epochs: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    train_examples: int = 0
    seconds: float = 0.0


def finetune(
    model: SequenceModel,
    spec: TaskSpec,
    train: Encoded,
    dev: Encoded | None,
    settings: FinetuneSettings,
    pad_id: int,
    progress: bool = False,
) -> History:
    """Trains `model` in place; returns the per-epoch losses and dev scores."""
    import time

    device = pick_device(settings.device)
    torch.manual_seed(settings.seed)
    model.to(device).train()
    per_epoch = math.ceil(len(train.ids) / settings.batch_size)
    total = per_epoch * settings.epochs
    warmup = int(total * settings.warmup)
    optimizer = torch.optim.AdamW(
        decay_groups(model, settings.weight_decay),
        lr=settings.learning_rate,
        betas=(0.9, 0.999),
        eps=1e-6,
    )

    def linear(step: int) -> float:
        if step < warmup:
            return step / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, linear)
    regression = spec.shape == "regression"
    rng = random.Random(settings.seed)
    history = History()
    start = time.perf_counter()
    bar = tqdm(total=total, desc=f"finetune {spec.name}", unit="step", disable=not progress)
    for epoch in range(settings.epochs):
        order = list(range(len(train.ids)))
        rng.shuffle(order)
        losses = []
        for batch, labels in batches(train, settings.batch_size, order, pad_id, device):
            loss = task_loss(model(*_inputs(model, batch)), labels, regression)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), settings.max_grad_norm)
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            history.steps += 1
            bar.update()
            bar.set_postfix(loss=f"{losses[-1]:.4f}")
        history.train_examples += len(order)
        record: dict[str, Any] = {"epoch": epoch + 1, "train_loss": float(np.mean(losses))}
        if dev is not None:
            record["dev"] = score(
                spec, predict(model, dev, settings.eval_batch_size, pad_id), dev.labels
            )
        history.epochs.append(record)
    bar.close()
    history.seconds = time.perf_counter() - start
    model.eval()
    return history
