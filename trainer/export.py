"""A run's checkpoint as a directory Hugging Face `transformers` loads, with its tokenizer.

| our model | transformers class |
|---|---|
| bert, post-LN, nsp/sop head | `BertForPreTraining` |
| bert, post-LN, no 2-class head | `BertForMaskedLM` (an sso, sbo or wso head stays behind) |
| bert or roberta, pre-LN | `RobertaPreLayerNormForMaskedLM` (pre-LN layers, a final LayerNorm) |
| roberta | `RobertaForMaskedLM` |
| albert | `AlbertForPreTraining` with a sentence head (2 or 3 labels), else `AlbertForMaskedLM` |
| electra | `ElectraForPreTraining`, and `generator/` with `ElectraForMaskedLM` |
| gpt | `GPT2LMHeadModel` |
| t5 | `T5ForConditionalGeneration` |
| xlnet | `XLNetLMHeadModel` |
| bart | `BartForConditionalGeneration` |

Each family's mapping is in its model file (trainer/models/), reached through its registry
entry (`trainer.families.to_transformers`). Pre-LN ALBERT and ELECTRA have no transformers
class and are refused.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from torch import nn

from clozeworks.corpus.vocab.files import copy_tokenizer_files
from clozeworks.schemas.errors import BadInputError, ClozeError, UsageError
from clozeworks.schemas.validate import read_json_object
from clozeworks.trainer.checkpoint import (
    DamagedCheckpoint,
    committed_steps,
    load_intact,
    shape_problem,
    step_dir,
)
from clozeworks.trainer.config import TrainConfig, load_config_file
from clozeworks.trainer.families import build_model, described_model, to_transformers
from clozeworks.trainer.metrics import METRICS_FILE, read_metrics
from clozeworks.trainer.nonfinite import check_finite

CONFIG_FILE = "config.json"
# A checkpoint's directory in a run (trainer.checkpoint.step_dir).
STEP_DIR = re.compile(r"step-(\d+)")


def load_run(run: Path, step: int | None = None) -> tuple[TrainConfig, nn.Module, dict[str, Any]]:
    """The run's config, its model with the weights of `step` (newest if None), config.json."""
    path = run / CONFIG_FILE
    checkpoint = STEP_DIR.fullmatch(run.name)
    if not path.is_file() and checkpoint and (run.parent / CONFIG_FILE).is_file():
        raise UsageError(
            f"{run} is a checkpoint of the run {run.parent}: --run {run.parent} "
            f"--step {int(checkpoint[1])}"
        )
    if not path.is_file():
        raise BadInputError(f"{run}: no {CONFIG_FILE}, so this is not a training run directory")
    raw = read_json_object(path)
    config = load_config_file(path, TrainConfig())
    steps = committed_steps(run)
    if not steps:
        raise BadInputError(f"{run}: no committed checkpoint (step-NNNNNNN/ with COMMITTED)")
    if step is not None and step not in steps:
        raise UsageError(f"{run}: no committed checkpoint for --step {step}; have {steps}")
    chosen = step_dir(run, step or steps[-1])
    # An edited config.json (hidden_size: 1000000) would allocate until killed: its shapes
    # are checked against the weights' header first, on a model that takes no memory.
    described = described_model(config, str(path))
    problem = shape_problem(described, chosen / "model.safetensors")
    if problem is not None:
        raise BadInputError(f"{path}: the model it describes does not fit the weights: {problem}")
    model = build_model(config)
    try:
        load_intact(chosen, model, None)
    except DamagedCheckpoint as err:
        older = [s for s in steps if s < (step or steps[-1])]
        hint = f"; --step {older[-1]} is the previous one" if older else ""
        raise BadInputError(f"{chosen}: damaged checkpoint: {err}{hint}") from None
    return config, model.eval(), raw


def export_run(run: Path, output: Path, step: int | None = None) -> list[Path]:
    """Write `output` (and `output/generator` for ELECTRA); returns the directories written."""
    config, model, raw = load_run(run, step)
    chosen = step if step is not None else committed_steps(run)[-1]
    try:
        check_finite(model, str(step_dir(run, chosen)), "export an earlier --step")
    except ClozeError as err:
        raise BadInputError(str(err)) from None
    tokenizer = Path(raw.get("tokenizer", ""))
    if not (tokenizer / "tokenizer.json").is_file():
        raise BadInputError(f"{tokenizer}: the run's tokenizer is missing (config.json names it)")
    written = []
    special = special_ids(tokenizer)
    for sub, hf in to_transformers(model, config, special):
        target = output / sub
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        hf.save_pretrained(tmp)
        copy_tokenizer_files(tokenizer, tmp)
        _inputs_it_reads(tmp, hf)
        if sub == "":
            card = model_card(config, raw, run, chosen, type(hf).__name__, model)
            (tmp / CARD_FILE).write_text(card, encoding="utf-8")
        readable_by_all(tmp)
        shutil.rmtree(target, ignore_errors=True)
        tmp.replace(target)
        written.append(target)
    return written


CARD_FILE = "README.md"


def _inputs_it_reads(directory: Path, hf: nn.Module) -> None:
    """Drop `token_type_ids` from the copied tokenizer's outputs when the model's forward
    takes none (BART, T5, GPT-2): `model.generate(**tokenizer(text))` refuses an input
    the model does not read."""
    path = directory / "tokenizer_config.json"
    if not path.is_file() or "token_type_ids" in inspect.signature(hf.forward).parameters:
        return
    config = json.loads(path.read_text(encoding="utf-8"))
    names = config.get("model_input_names", [])
    if "token_type_ids" in names:
        config["model_input_names"] = [n for n in names if n != "token_type_ids"]
        text = json.dumps(config, indent=2, ensure_ascii=False) + "\n"
        path.write_text(text, encoding="utf-8")


def model_card(
    config: TrainConfig, raw: dict[str, Any], run: Path, step: int, hf_class: str, model: nn.Module
) -> str:
    """README.md for the exported model (the Hub's model card): what was trained on what,
    for how long, how it scored on held-out data, and how to load it."""
    m = config.model
    parameters = sum(p.numel() for p in model.parameters())
    evals = [r for r in read_metrics(run / METRICS_FILE) if r.get("step", 0) <= step]
    held_out = next((r for r in reversed(evals) if any(k.startswith("eval_") for k in r)), None)
    lines = [
        "---",
        "library_name: transformers",
        f"tags: [clozeworks, {m.family}, {', '.join(config.objectives)}]",
        "---",
        "",
        f"# {m.family} pretrained with clozeworks",
        "",
        f"- Architecture: {m.family}, {m.num_layers} layers, hidden {m.hidden_size}, "
        f"{m.num_heads} heads, vocabulary {m.vocab_size}; {parameters:,} parameters "
        f"(`{hf_class}`)",
        f"- Objectives: {', '.join(config.objectives)}",
        f"- Training: step {step} of {config.max_steps}, batch {config.batch_size} x "
        f"{config.grad_accum} accumulation, learning rate {config.optim.lr:g}, precision "
        f"{config.precision}, seed {config.seed}",
        f"- Data: `{raw.get('data', '?')}`",
    ]
    summary = raw.get("data_summary")
    if isinstance(summary, list):
        lines += [f"  - {line}" for line in summary if isinstance(line, str)]
    if held_out is not None:
        figures = ", ".join(
            f"{k.removeprefix('eval_')} {v:.4g}"
            for k, v in sorted(held_out.items())
            if k.startswith("eval_") and isinstance(v, int | float)
        )
        lines.append(f"- Held-out (step {held_out['step']}): {figures}")
    lines += [
        "",
        "```python",
        "from transformers import AutoModel, AutoTokenizer",
        "",
        'tokenizer = AutoTokenizer.from_pretrained("PATH")',
        'model = AutoModel.from_pretrained("PATH")',
        "```",
        "",
        f"Exported by `cloze export` from the run `{run.name}`; its config.json has every setting.",
        "",
    ]
    return "\n".join(lines)


def special_ids(tokenizer: Path) -> dict[str, int]:
    """The tokenizer's special ids by role (pad, cls, sep, ...)."""
    from clozeworks.corpus.vocab.files import load_tokenizer

    return load_tokenizer(tokenizer).special_ids


def readable_by_all(directory: Path) -> None:
    """Give written files the mode the user's umask asks for: a model is for sharing, and
    some writers create their files 0600 (safetensors through a temporary file)."""
    mask = os.umask(0)
    os.umask(mask)
    for f in directory.rglob("*"):
        if f.is_file():
            f.chmod(0o666 & ~mask)
