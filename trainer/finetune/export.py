"""A fine-tuned model as transformers' `...ForSequenceClassification`,
`...ForTokenClassification`, `...ForQuestionAnswering` or `...ForMultipleChoice` of its
family.

The encoder's tensors are the ones `cloze export` writes (trainer/export.py), under the
family's root (`bert.`, `roberta.`, ...); the head's go where transformers keeps its
classifier (see trainer/finetune/model.py for the layouts).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from clozeworks.corpus.vocab.files import copy_tokenizer_files
from clozeworks.schemas.errors import UsageError
from clozeworks.trainer.config import TrainConfig
from clozeworks.trainer.export import readable_by_all
from clozeworks.trainer.families import build_model, family_of, hf_weights
from clozeworks.trainer.finetune.model import (
    ChoiceModel,
    QAModel,
    SequenceModel,
    TaskModel,
    TokenModel,
)
from clozeworks.trainer.models import hf


def to_transformers_task(
    model: TaskModel,
    config: TrainConfig,
    spec_labels: tuple[str, ...],
    task_name: str | None = None,
) -> Any:
    """A transformers model with `model`'s weights: `...ForSequenceClassification` (empty
    `spec_labels`: regression) or, for a TokenModel, `...ForTokenClassification`.
    `task_name` goes into the config's `finetuning_task` (transformers' own field for it),
    where `cloze inspect` reads it back."""
    tf = hf.transformers_module()
    m = config.model
    own = family_of(m).own_classifier
    if own is not None:  # a sequence task (finetune.model.check_fits)
        return own.to_transformers(tf, model, _task_fields(spec_labels, model.outputs, task_name))
    make_layout = family_of(m).layout
    assert make_layout is not None  # fine-tuned models are of encoder families
    layout = make_layout(m)
    if not layout.exportable:
        raise UsageError(f"transformers has no pre-LN {m.family}; it cannot be exported")
    # The pretraining model of the same architecture carries the encoder's export mapping.
    pretraining: Any = build_model(config)
    pretraining.encoder.load_state_dict(model.encoder.state_dict())
    _, encoder_tensors = hf_weights(pretraining, config)[0]
    root = layout.root
    weights: hf.Tensors = {
        k: v.detach().clone()
        for k, v in encoder_tensors.items()
        if k.startswith(f"{root}.") and not k.startswith(f"{root}.pooler")
    }
    labels = spec_labels
    if isinstance(model, TokenModel):
        weights.update(hf.linear("classifier", model.classifier))
        kind = "TokenClassification"
    elif isinstance(model, QAModel):
        weights.update(hf.linear("qa_outputs", model.qa_outputs))
        kind, labels = "QuestionAnswering", ("start", "end")
    elif isinstance(model, ChoiceModel):
        weights.update(hf.linear(layout.choice_summary, model.dense))
        weights.update(hf.linear("classifier", model.classifier))
        kind = "MultipleChoice"  # the labels name the options, in order
    else:
        head = model.head
        if layout.pooler is not None:
            weights.update(hf.linear(layout.pooler, head.dense))
            weights.update(hf.linear("classifier", head.out))
        else:
            weights.update(hf.linear("classifier.dense", head.dense))
            weights.update(hf.linear("classifier.out_proj", head.out))
        cls = getattr(tf, f"{layout.name}ForSequenceClassification")
        task = _task_fields(labels, model.outputs, task_name)
        return hf.load(cls, layout.config(tf, m, **task), weights)
    task = dict(
        finetuning_task=task_name,
        num_labels=len(labels) if isinstance(model, ChoiceModel) else model.outputs,
        id2label=dict(enumerate(labels)),
        label2id={name: i for i, name in enumerate(labels)},
    )
    cls = getattr(tf, f"{layout.name}For{kind}")
    return hf.load(cls, layout.config(tf, m, **task), weights)


def _task_fields(labels: tuple[str, ...], outputs: int, task_name: str | None) -> dict[str, Any]:
    """A sequence task's config fields; no labels: regression, one output named score."""
    regression = not labels
    labels = labels or ("score",)
    return dict(
        finetuning_task=task_name,
        num_labels=outputs,
        id2label=dict(enumerate(labels)),
        label2id={name: i for i, name in enumerate(labels)},
        problem_type="regression" if regression else "single_label_classification",
    )


def sequence_to_transformers(
    model: SequenceModel, config: TrainConfig, labels: tuple[str, ...]
) -> Any:
    """`...ForSequenceClassification` with `model`'s weights; empty `labels`: regression."""
    return to_transformers_task(model, config, labels)


def export_finetuned(directory: Path, output: Path) -> Path:
    """`cloze export` of a fine-tuned model directory: the transformers model and tokenizer,
    written under a temporary name and renamed when complete."""
    from clozeworks.trainer.finetune.store import load

    tuned = load(directory)
    hf = to_transformers_task(tuned.model, tuned.config, tuned.spec.labels, tuned.spec.name)
    tmp = output.with_name(f".{output.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    hf.save_pretrained(tmp)
    copy_tokenizer_files(tuned.tokenizer, tmp)
    readable_by_all(tmp)
    shutil.rmtree(output, ignore_errors=True)
    tmp.replace(output)
    return output
