"""A fine-tuned model directory:

    finetune.json      version, task (TaskSpec), model (the architecture), settings, source,
                       per-epoch losses and dev scores, examples/s
    model.safetensors  the SequenceModel's weights (tensors only: never a pickle)
    tokenizer/         the pretrained model's tokenizer files
    eval.json          written by `cloze evaluate`: scores by split

It is written under a temporary name and renamed when complete, so a directory with
`finetune.json` is whole.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clozeworks.corpus.vocab.files import copy_tokenizer_files
from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.schemas.validate import loads
from clozeworks.trainer.config import TrainConfig
from clozeworks.trainer.finetune.model import TaskModel, untrained_task_model
from clozeworks.trainer.finetune.tasks import TaskSpec

FINETUNE_FILE = "finetune.json"
EVAL_FILE = "eval.json"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_DIR = "tokenizer"
VERSION = 1


@dataclass
class Finetuned:
    model: TaskModel
    config: TrainConfig
    spec: TaskSpec
    tokenizer: Path
    info: dict[str, Any]


def is_finetuned(path: Path) -> bool:
    return (path / FINETUNE_FILE).is_file()


def save(
    output: Path,
    model: TaskModel,
    config: TrainConfig,
    spec: TaskSpec,
    tokenizer: Path,
    info: dict[str, Any],
    tokenizer_json: str | None = None,
) -> None:
    """`tokenizer_json`: the tokenizer as fine-tuning used it, where it differs from the
    file in `tokenizer` (relation extraction's entity markers added)."""
    from safetensors.torch import save_file

    tmp = output.with_name(f".{output.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    state = {k: v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()}
    save_file(state, str(tmp / WEIGHTS_FILE))
    # Tokenizer files only: a transformers source directory also holds its config.json and
    # weights, which an export would otherwise write over the fine-tuned model's.
    copy_tokenizer_files(tokenizer, tmp / TOKENIZER_DIR)
    if tokenizer_json is not None:
        (tmp / TOKENIZER_DIR / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
    payload = {
        "version": VERSION,
        "task": spec.to_json(),
        "train_config": config.to_dict(),
        **info,
    }
    (tmp / FINETUNE_FILE).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    if output.exists():
        shutil.rmtree(output)
    tmp.replace(output)


def load(path: Path) -> Finetuned:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    meta = path / FINETUNE_FILE
    if not meta.is_file():
        raise BadInputError(f"{path}: not a fine-tuned model directory (no {FINETUNE_FILE})")
    try:
        raw = loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise BadInputError(f"{meta}: not readable JSON ({err})") from None
    if raw.get("version") != VERSION:
        raise BadInputError(f"{meta}: version {raw.get('version')!r}, this reads {VERSION}")
    spec = TaskSpec.from_json(raw["task"], str(meta))
    config = TrainConfig.from_dict(raw["train_config"])
    model = untrained_task_model(config, spec.shape, spec.num_outputs, path / TOKENIZER_DIR)
    weights = path / WEIGHTS_FILE
    try:
        tensors = load_file(str(weights))
    except FileNotFoundError:
        raise BadInputError(f"{weights}: missing (the model's weights)") from None
    except (OSError, SafetensorError) as err:
        raise BadInputError(f"{weights}: not a readable safetensors file ({err})") from None
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    if missing or unexpected:
        raise BadInputError(
            f"{path / WEIGHTS_FILE}: does not fit the model in {FINETUNE_FILE} "
            f"(missing {missing[:3]}, unexpected {unexpected[:3]})"
        )
    return Finetuned(model.eval(), config, spec, path / TOKENIZER_DIR, raw)


def record_eval(path: Path, split: str, scores: dict[str, Any]) -> Path:
    """Adds `split`'s scores to eval.json (written whole through a temporary file)."""
    target = path / EVAL_FILE
    current: dict[str, Any] = {}
    if target.is_file():
        try:
            current = loads(target.read_text(encoding="utf-8"))
        except ValueError:
            raise UsageError(f"{target}: not JSON; remove it to evaluate again") from None
    current[split] = scores
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(json.dumps(current, indent=2) + "\n", encoding="utf-8")
    tmp.replace(target)
    return target


def _json_file(path: Path) -> Any:
    try:
        return loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise BadInputError(f"{path}: not readable JSON ({err})") from None


def finetuned_summary(path: Path) -> dict[str, Any]:
    """`cloze inspect` of a fine-tuned model directory: task, settings, per-epoch losses and
    dev scores, and every split scored so far (eval.json)."""
    raw = _json_file(path / FINETUNE_FILE)
    task = raw.get("task", {})
    model = raw.get("train_config", {}).get("model", {})
    evals = _json_file(path / EVAL_FILE) if (path / EVAL_FILE).is_file() else {}
    return {
        "kind": "finetuned",
        "path": str(path),
        "task": {k: task.get(k) for k in ("name", "shape", "labels", "metrics")},
        "model": {k: model.get(k) for k in ("family", "num_layers", "hidden_size", "vocab_size")},
        "source": raw.get("source"),
        "random_init": raw.get("random_init", False),
        "multitask": raw.get("multitask"),
        "settings": raw.get("settings"),
        "examples": raw.get("examples"),
        "skipped": raw.get("skipped"),
        "truncated": raw.get("truncated"),
        "epochs": raw.get("epochs", []),
        "sweep": raw.get("sweep"),
        "train_examples_per_second": raw.get("train_examples_per_second"),
        "eval": evals,
    }


def multitask_summary(path: Path) -> dict[str, Any]:
    raw = _json_file(path / "multitask.json")
    return {"kind": "multitask", "path": str(path), **raw}
