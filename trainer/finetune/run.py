"""`cloze finetune` and `cloze evaluate` as functions: load, encode, train or score, write."""

from __future__ import annotations

import copy
import json
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from clozeworks.corpus.outputs import LOCAL
from clozeworks.schemas.errors import BadInputError, SettingError, UsageError
from clozeworks.schemas.validate import MAX_TOKENIZER_BYTES, read_bounded
from clozeworks.trainer.finetune.choice import encode_choices, read_choices
from clozeworks.trainer.finetune.encoded import Encoded, encode
from clozeworks.trainer.finetune.klue_ner import encode_char_sentences, read_char_sentences
from clozeworks.trainer.finetune.klue_re import (
    MARKERS,
    encode_marked,
    grow_embeddings,
    with_markers,
)
from clozeworks.trainer.finetune.model import (
    Backbone,
    TaskModel,
    check_fits,
    load_backbone,
    randomized,
    task_model,
)
from clozeworks.trainer.finetune.qa import encode_questions, read_questions, trainable
from clozeworks.trainer.finetune.readers import read_examples
from clozeworks.trainer.finetune.store import is_finetuned, load, record_eval, save
from clozeworks.trainer.finetune.tasks import TaskSpec
from clozeworks.trainer.finetune.tokens import encode_sentences, read_sentences
from clozeworks.trainer.finetune.train import (
    RECIPES,
    FinetuneSettings,
    TaskRun,
    finetune,
    finetune_tasks,
    pick_device,
    predict,
    score,
)
from clozeworks.trainer.models.bert import padded_vocab


def _tokenizer(directory: Path) -> Tokenizer:
    path = directory / "tokenizer.json"
    data = read_bounded(path, MAX_TOKENIZER_BYTES, "tokenizer file")
    try:
        return Tokenizer.from_str(data.decode("utf-8", "replace"))
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
    if spec.format == "klue_ner":
        chars = read_char_sentences(spec, data, split)
        outside = spec.labels.index("O")
        return encode_char_sentences(tokenizer, chars.items, max_len, outside), 0
    if spec.shape == "tokens":
        sentences = read_sentences(spec, data, split)
        return encode_sentences(tokenizer, sentences.items, max_len), sentences.skipped
    if spec.shape == "qa":
        questions = read_questions(spec, data, split)
        encoded = encode_questions(tokenizer, questions.items, max_len)
        # Training leaves out answers not found where answer_start points (BERT's code too).
        return (trainable(encoded) if split == "train" else encoded), questions.unfound
    if spec.shape == "choice":
        questions = read_choices(spec, data, split)
        return encode_choices(tokenizer, questions.items, max_len, spec.blank), questions.skipped
    examples = read_examples(spec, data, split)
    if spec.entities:
        if tokenizer.token_to_id(MARKERS[0][0]) is None:
            raise BadInputError(f"{spec.name}: the tokenizer has no entity markers")
        labels = np.array([e.label for e in examples.items], dtype=np.float64)
        texts = [e.text_a for e in examples.items]
        return encode_marked(tokenizer, texts, labels, max_len), examples.skipped
    return encode(tokenizer, examples.items, max_len), examples.skipped


def _teacher(settings: FinetuneSettings, spec: TaskSpec, tokenizer: Tokenizer) -> TaskModel | None:
    """The fine-tuned teacher of `--teacher`, checked against the task and the tokenizer."""
    if settings.teacher is None:
        return None
    path = Path(settings.teacher)
    if not is_finetuned(path):
        raise BadInputError(f"--teacher {path}: not a fine-tuned model directory (cloze finetune)")
    tuned = load(path)
    if (tuned.spec.shape, tuned.spec.labels) != (spec.shape, spec.labels):
        raise UsageError(
            f"--teacher {path}: fine-tuned for {tuned.spec.name} ({tuned.spec.shape}, labels "
            f"{', '.join(tuned.spec.labels) or 'none'}), not for this task's predictions"
        )
    if _tokenizer(tuned.tokenizer).get_vocab() != tokenizer.get_vocab():
        raise UsageError(
            f"--teacher {path}: its tokenizer ({tuned.tokenizer}) is not the student's; the "
            "teacher must read the same token ids"
        )
    if settings.max_seq_len > tuned.config.model.max_position:
        raise SettingError(
            "max_seq_len", f"is longer than the teacher's {tuned.config.model.max_position}"
        )
    return tuned.model


def _with_markers(
    backbone: Backbone, tokenizer: Tokenizer, specs: list[TaskSpec]
) -> tuple[Backbone, Tokenizer, str | None]:
    """For relation extraction: the tokenizer with the entity markers, the backbone with
    word embeddings for them (and its config's vocabulary size grown to fit), and the
    tokenizer file to keep beside the fine-tuned model; else all as they were."""
    if not any(s.entities for s in specs):
        return backbone, tokenizer, None
    tok = with_markers(tokenizer)
    m = backbone.config.model
    if tok.get_vocab_size() > m.vocab_size:
        m = replace(m, vocab_size=tok.get_vocab_size())
        embeddings = backbone.encoder.embeddings
        embeddings.word = grow_embeddings(embeddings.word, padded_vocab(m), m.initializer_range)
        backbone = replace(backbone, config=replace(backbone.config, model=m))
    return backbone, tok, tok.to_str()


# `--sweep`: the learning rates of the run's recipe (RECIPES), each tried, the best on dev kept.
RECIPE_SWEEP = "recipe"


def run_finetune(
    source: Path,
    spec: TaskSpec,
    data: Path,
    output: Path,
    settings: FinetuneSettings,
    step: int | None = None,
    overwrite: bool = False,
    progress: bool = False,
    sweep: tuple[float, ...] | str = (),
    random_init: bool = False,
) -> dict[str, Any]:
    """Fine-tunes `source` (a run, a step directory or a transformers directory) on the
    task's train split, scores dev after each epoch, writes `output`; returns finetune.json.
    With `sweep`, one run per learning rate, and the one with the best dev score (the
    task's first metric, after the last epoch) is written; all of them are in `sweep`
    (RECIPE_SWEEP: the recipe's rates). The recipe (`auto`: by the model's hidden size)
    fills in the learning rate, batch and epochs not given. `random_init` keeps only the
    source's architecture and tokenizer (the baseline)."""
    if output.exists() and any(output.iterdir()) and not overwrite:
        raise UsageError(f"{output}: exists and is not empty; pass --overwrite to replace it")
    if sweep and "dev" not in spec.files:
        raise UsageError(f"--sweep picks by the dev score; task {spec.name!r} has no dev split")
    backbone = load_backbone(source, step)
    check_fits(backbone.config, spec.shape, bool(spec.entities))
    if random_init:
        backbone = randomized(backbone, settings.seed)
    m = backbone.config.model
    settings = settings.resolved(m.hidden_size)
    if sweep == RECIPE_SWEEP:
        sweep = RECIPES[settings.recipe].sweep
    if settings.max_seq_len > m.max_position:
        raise SettingError(
            "max_seq_len",
            f"{settings.max_seq_len} is longer than the model's {m.max_position} positions",
        )
    tokenizer = _tokenizer(backbone.tokenizer)
    if tokenizer.get_vocab_size() > m.vocab_size:
        raise BadInputError(
            f"{backbone.tokenizer}: {tokenizer.get_vocab_size()} tokens, the model has "
            f"{m.vocab_size}: not the model's tokenizer"
        )
    backbone, tokenizer, marked = _with_markers(backbone, tokenizer, [spec])
    pad_id = _pad_id(tokenizer, m.pad_token_id)
    train, skipped_train = _encode_split(spec, data, "train", tokenizer, settings.max_seq_len)
    dev = skipped_dev = None
    if "dev" in spec.files:
        dev, skipped_dev = _encode_split(spec, data, "dev", tokenizer, settings.max_seq_len)
    teacher = _teacher(settings, spec, tokenizer)
    trials = [replace(settings, learning_rate=lr) for lr in tuple(sweep)] or [settings]
    best: tuple[float, TaskModel, FinetuneSettings, Any] | None = None
    tried = []
    for trial in trials:
        if best is not None:  # every trial starts from the same weights
            backbone = load_backbone(source, step)
            if random_init:
                backbone = randomized(backbone, settings.seed)
            backbone, _, _ = _with_markers(backbone, _tokenizer(backbone.tokenizer), [spec])
        model = task_model(spec.shape, backbone, spec.num_outputs)
        history = finetune(model, spec, train, dev, trial, pad_id, progress, teacher)
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
        "examples": {"train": train.size, "dev": 0 if dev is None else dev.size},
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
    save(output, model, backbone.config, spec, backbone.tokenizer, info, marked)
    if info["dev"] is not None:
        record_eval(output, "dev", {**info["dev"], "examples": dev.size if dev else 0})
    return info


def run_evaluate(
    model_dir: Path,
    data: Path,
    split: str = "dev",
    spec: TaskSpec | None = None,
    batch_size: int = 128,
    device: str = FinetuneSettings.device,
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
    default = FinetuneSettings.__dataclass_fields__["max_seq_len"].default
    max_len = int(tuned.info.get("settings", {}).get("max_seq_len", default))
    encoded, skipped = _encode_split(task, data, split, tokenizer, max_len)
    model = tuned.model.to(pick_device(device))
    start = time.perf_counter()
    pad_id = _pad_id(tokenizer, tuned.config.model.pad_token_id)
    outputs = predict(model, encoded, batch_size, pad_id)
    seconds = time.perf_counter() - start
    scores: dict[str, Any] = score(task, outputs, encoded)
    scores.update(examples=encoded.size, skipped=skipped, seconds=round(seconds, 3))
    if task.shape in ("single", "pair", "regression", "choice"):
        rows = prediction_rows(task, outputs, encoded)
        scores["predictions"] = write_predictions(model_dir, split, rows).name
        if task.shape != "regression":
            scores["confusion"] = confusion(task, rows)
    record_eval(model_dir, split, scores)
    return scores


def prediction_rows(task: TaskSpec, outputs: list[Any], encoded: Encoded) -> list[dict[str, Any]]:
    """One row per example, in file order (rows the reader skipped are not examples): the
    gold label and the model's, and for a classification each label's probability."""
    rows = []
    for i, (logits, gold) in enumerate(zip(outputs, encoded.labels, strict=True)):
        if task.shape == "regression":
            rows.append({"example": i, "label": float(gold), "prediction": float(logits[0])})
            continue
        exp = np.exp(logits - logits.max())
        probabilities = exp / exp.sum()
        rows.append(
            {
                "example": i,
                "label": task.labels[int(gold)],
                "prediction": task.labels[int(np.argmax(logits))],
                "probabilities": {
                    name: round(float(p), 6)
                    for name, p in zip(task.labels, probabilities, strict=True)
                },
            }
        )
    return rows


def write_predictions(model_dir: Path, split: str, rows: list[dict[str, Any]]) -> Path:
    """predictions-SPLIT.jsonl beside eval.json, written whole under a temporary name."""
    target = model_dir / f"predictions-{split}.jsonl"
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    LOCAL.write_atomic(str(target), text.encode("utf-8"))
    return target


def confusion(task: TaskSpec, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts of (gold, predicted) label pairs: `matrix[g][p]`, labels in the task's order."""
    index = {name: i for i, name in enumerate(task.labels)}
    matrix = np.zeros((len(task.labels), len(task.labels)), dtype=np.int64)
    for row in rows:
        matrix[index[row["label"]], index[row["prediction"]]] += 1
    return {"labels": list(task.labels), "matrix": matrix.tolist()}


MULTITASK_FILE = "multitask.json"


def task_dir_name(spec: TaskSpec) -> str:
    """A task's directory under a multi-task output: its name, `/` as `-` (glue-mrpc)."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in spec.name)


def run_multitask(
    source: Path,
    specs: list[TaskSpec],
    data: list[Path],
    output: Path,
    settings: FinetuneSettings,
    step: int | None = None,
    overwrite: bool = False,
    progress: bool = False,
    then_finetune: bool = False,
    random_init: bool = False,
) -> dict[str, Any]:
    """MT-DNN: one encoder shared by a head per task, trained on batches of all the tasks
    sampled in proportion to their sizes; with `then_finetune`, each task's model is then
    fine-tuned on its task alone (MT-DNN's second stage). Writes OUTPUT/<task>/ (a
    fine-tuned model directory each) and OUTPUT/multitask.json; returns the latter."""
    if len(specs) != len(data):
        raise UsageError(f"{len(specs)} --task but {len(data)} --data: give one --data per task")
    names = [task_dir_name(s) for s in specs]
    if len(set(names)) != len(names):
        raise UsageError(f"a task is given twice: {', '.join(s.name for s in specs)}")
    if output.exists() and any(output.iterdir()) and not overwrite:
        raise UsageError(f"{output}: exists and is not empty; pass --overwrite to replace it")
    if settings.teacher:
        raise UsageError("--teacher takes one --task; MT-DNN trains from the gold labels")
    backbone = load_backbone(source, step)
    for spec in specs:
        check_fits(backbone.config, spec.shape, bool(spec.entities))
    if random_init:
        backbone = randomized(backbone, settings.seed)
    m = backbone.config.model
    settings = settings.resolved(m.hidden_size)
    tokenizer = _tokenizer(backbone.tokenizer)
    backbone, tokenizer, marked = _with_markers(backbone, tokenizer, specs)
    pad_id = _pad_id(tokenizer, m.pad_token_id)
    runs = []
    for spec, directory in zip(specs, data, strict=True):
        train, _ = _encode_split(spec, directory, "train", tokenizer, settings.max_seq_len)
        dev = None
        if "dev" in spec.files:
            dev, _ = _encode_split(spec, directory, "dev", tokenizer, settings.max_seq_len)
        # Every head sits on the same encoder object: its gradients add up over tasks.
        runs.append(TaskRun(spec, task_model(spec.shape, backbone, spec.num_outputs), train, dev))
    history = finetune_tasks(runs, settings, pad_id, progress)
    summary: dict[str, Any] = {
        "source": str(source),
        "tasks": [s.name for s in specs],
        "settings": settings.to_json(),
        "batches_per_epoch": {r.spec.name: -(-r.train.size // settings.batch) for r in runs},
        "multitask_epochs": history.epochs,
        "multitask_seconds": round(history.seconds, 3),
    }
    final = history.epochs[-1].get("dev_by_task", {}) if history.epochs else {}
    summary["dev"] = {name: final.get(name) for name in summary["tasks"]}
    if then_finetune:
        summary["finetuned_dev"] = {}
    tuned_models = []
    for run in runs:
        model = copy.deepcopy(run.model).cpu()
        info: dict[str, Any] = {"source": str(source), "multitask": summary["tasks"]}
        dev_scores = final.get(run.spec.name)
        if then_finetune:
            single = finetune(model, run.spec, run.train, run.dev, settings, pad_id, progress)
            info["epochs"] = single.epochs
            dev_scores = single.epochs[-1].get("dev") if single.epochs else None
            summary["finetuned_dev"][run.spec.name] = dev_scores
        info.update(settings=settings.to_json(), dev=dev_scores, random_init=random_init)
        tuned_models.append((run, model.cpu(), info))
    tmp = output.with_name(f".{output.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for (run, model, info), name in zip(tuned_models, names, strict=True):
        save(tmp / name, model, backbone.config, run.spec, backbone.tokenizer, info, marked)
        if info["dev"] is not None:
            record_eval(tmp / name, "dev", dict(info["dev"]))
    (tmp / MULTITASK_FILE).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if output.exists():
        shutil.rmtree(output)
    tmp.replace(output)
    return summary
