"""`cloze finetune` and `cloze evaluate` as functions: load, encode, train or score, write."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.trainer.finetune.model import SequenceModel, load_backbone, randomized
from clozeworks.trainer.finetune.readers import read_examples
from clozeworks.trainer.finetune.store import is_finetuned, load, record_eval, save
from clozeworks.trainer.finetune.tasks import TaskSpec
from clozeworks.trainer.finetune.train import (
    Encoded,
    FinetuneSettings,
    encode,
    finetune,
    pick_device,
    predict,
    score,
)


def _tokenizer(directory: Path) -> Tokenizer:
    path = directory / "tokenizer.json"
    try:
        return Tokenizer.from_file(str(path))
    except Exception as err:  # tokenizers raises plain Exception on a bad file
        raise BadInputError(f"{path}: not a tokenizers file ({err})") from None


def _pad_id(tokenizer: Tokenizer, fallback: int) -> int:
    for token in ("[PAD]", "<pad>"):
        found = tokenizer.token_to_id(token)
        if found is not None:
            return found
    return fallback


def _encode_split(
    spec: TaskSpec, data: Path, split: str, tokenizer: Tokenizer, max_len: int
) -> tuple[Encoded, int]:
    examples = read_examples(spec, data, split)
    return encode(tokenizer, examples.items, max_len), examples.skipped


# BERT section 4.1: "we selected the best fine-tuning learning rate (among 5e-5, 4e-5, 3e-5,
# and 2e-5) on the Dev set", batch 32, 3 epochs.
SWEEP_LEARNING_RATES = (5e-5, 4e-5, 3e-5, 2e-5)


def run_finetune(
    source: Path,
    spec: TaskSpec,
    data: Path,
    output: Path,
    settings: FinetuneSettings,
    step: int | None = None,
    overwrite: bool = False,
    progress: bool = False,
    sweep: tuple[float, ...] = (),
    random_init: bool = False,
) -> dict[str, Any]:
    """Fine-tunes `source` (a run, a step directory or a transformers directory) on the
    task's train split, scores dev after each epoch, writes `output`; returns finetune.json.
    With `sweep`, one run per learning rate, and the one with the best dev score (the
    task's first metric, after the last epoch) is written; all of them are in `sweep`.
    `random_init` keeps only the source's architecture and tokenizer (the baseline)."""
    if output.exists() and any(output.iterdir()) and not overwrite:
        raise UsageError(f"{output}: exists and is not empty; pass --overwrite to replace it")
    if sweep and "dev" not in spec.files:
        raise UsageError(f"--sweep picks by the dev score; task {spec.name!r} has no dev split")
    backbone = load_backbone(source, step)
    if random_init:
        backbone = randomized(backbone, settings.seed)
    m = backbone.config.model
    if settings.max_seq_len > m.max_position:
        raise UsageError(
            f"--max-seq-len {settings.max_seq_len} is longer than the model's "
            f"{m.max_position} positions"
        )
    tokenizer = _tokenizer(backbone.tokenizer)
    if tokenizer.get_vocab_size() > m.vocab_size:
        raise BadInputError(
            f"{backbone.tokenizer}: {tokenizer.get_vocab_size()} tokens, the model has "
            f"{m.vocab_size}: not the model's tokenizer"
        )
    pad_id = _pad_id(tokenizer, m.pad_token_id)
    train, skipped_train = _encode_split(spec, data, "train", tokenizer, settings.max_seq_len)
    dev = skipped_dev = None
    if "dev" in spec.files:
        dev, skipped_dev = _encode_split(spec, data, "dev", tokenizer, settings.max_seq_len)
    trials = [replace(settings, learning_rate=lr) for lr in sweep] or [settings]
    best: tuple[float, SequenceModel, FinetuneSettings, Any] | None = None
    tried = []
    for trial in trials:
        if best is not None:  # every trial starts from the same weights
            backbone = load_backbone(source, step)
            if random_init:
                backbone = randomized(backbone, settings.seed)
        model = SequenceModel.from_backbone(backbone, spec.num_outputs)
        history = finetune(model, spec, train, dev, trial, pad_id, progress)
        final = history.epochs[-1].get("dev") or {}
        tried.append({"learning_rate": trial.learning_rate, "dev": final})
        key = final.get(spec.main_metric, float("-inf"))
        if best is None or key > best[0]:
            best = (key, model.cpu(), trial, history)
    assert best is not None
    _, model, chosen, history = best
    info: dict[str, Any] = {
        "source": str(source),
        "random_init": random_init,
        "settings": chosen.to_json(),
        "examples": {"train": len(train.ids), "dev": 0 if dev is None else len(dev.ids)},
        "skipped": {"train": skipped_train, "dev": skipped_dev or 0},
        "truncated": {"train": train.truncated, "dev": 0 if dev is None else dev.truncated},
        "epochs": history.epochs,
        "steps": history.steps,
        "train_seconds": round(history.seconds, 3),
        "train_examples_per_second": round(history.train_examples / max(history.seconds, 1e-9), 2),
        "dev": history.epochs[-1].get("dev") if history.epochs else None,
    }
    if sweep:
        info["sweep"] = tried
    save(output, model, backbone.config, spec, backbone.tokenizer, info)
    if info["dev"] is not None:
        record_eval(output, "dev", {**info["dev"], "examples": len(dev.ids) if dev else 0})
    return info


def run_evaluate(
    model_dir: Path,
    data: Path,
    split: str = "dev",
    spec: TaskSpec | None = None,
    batch_size: int = 128,
    device: str = "auto",
) -> dict[str, Any]:
    """Scores a fine-tuned model on one split of its task's files; adds them to eval.json."""
    if not is_finetuned(model_dir):
        raise BadInputError(f"{model_dir}: not a fine-tuned model directory (run cloze finetune)")
    tuned = load(model_dir)
    task = spec or tuned.spec
    if spec is not None and (spec.labels != tuned.spec.labels or spec.shape != tuned.spec.shape):
        raise UsageError(
            f"--task {spec.name} has other labels or shape than the model's task {tuned.spec.name}"
        )
    tokenizer = _tokenizer(tuned.tokenizer)
    max_len = int(tuned.info.get("settings", {}).get("max_seq_len", 128))
    encoded, skipped = _encode_split(task, data, split, tokenizer, max_len)
    model = tuned.model.to(pick_device(device))
    start = time.perf_counter()
    logits = predict(
        model, encoded, batch_size, _pad_id(tokenizer, tuned.config.model.pad_token_id)
    )
    seconds = time.perf_counter() - start
    scores: dict[str, Any] = score(task, logits, encoded.labels)
    scores.update(examples=len(encoded.ids), skipped=skipped, seconds=round(seconds, 3))
    record_eval(model_dir, split, scores)
    return scores
