"""A fine-tuned model as transformers' `...ForSequenceClassification` or
`...ForTokenClassification` of its family.

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
from clozeworks.trainer.export import (
    Tensors,
    _albert_groups,
    _common,
    _linear,
    _load,
    _readable_by_all,
    hf_weights,
)
from clozeworks.trainer.finetune.model import QAModel, SequenceModel, TaskModel, TokenModel
from clozeworks.trainer.models import build_model


def _layout(config: TrainConfig) -> str:
    m = config.model
    if m.pre_ln and m.family in ("albert", "electra"):
        raise UsageError(f"transformers has no pre-LN {m.family}; it cannot be exported")
    return "roberta_prelayernorm" if m.pre_ln else m.family


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
    try:
        import transformers as tf
    except ImportError:
        raise UsageError("export needs transformers: pip install 'clozeworks[export]'") from None
    m = config.model
    layout = _layout(config)
    # The pretraining model of the same architecture carries the encoder's export mapping.
    pretraining: Any = build_model(config)
    target = pretraining.discriminator if m.family == "electra" else pretraining.encoder
    target.load_state_dict(model.encoder.state_dict())
    _, encoder_tensors = hf_weights(pretraining, config)[0]
    root = "roberta_prelayernorm" if layout == "roberta_prelayernorm" else m.family
    weights: Tensors = {
        k: v.detach().clone()
        for k, v in encoder_tensors.items()
        if k.startswith(f"{root}.") and not k.startswith(f"{root}.pooler")
    }
    labels = spec_labels
    problem: dict[str, Any] = {}
    if isinstance(model, TokenModel):
        weights.update(_linear("classifier", model.classifier))
        kind = "TokenClassification"
    elif isinstance(model, QAModel):
        weights.update(_linear("qa_outputs", model.qa_outputs))
        kind, labels = "QuestionAnswering", ("start", "end")
    else:
        head = model.head
        if layout in ("bert", "albert"):
            pooler = "bert.pooler.dense" if layout == "bert" else "albert.pooler"
            weights.update(_linear(pooler, head.dense))
            weights.update(_linear("classifier", head.out))
        else:
            weights.update(_linear("classifier.dense", head.dense))
            weights.update(_linear("classifier.out_proj", head.out))
        kind = "SequenceClassification"
        regression = not labels
        labels = labels or ("score",)
        problem = {"problem_type": "regression" if regression else "single_label_classification"}
    task = dict(
        finetuning_task=task_name,
        num_labels=model.outputs,
        id2label=dict(enumerate(labels)),
        label2id={name: i for i, name in enumerate(labels)},
        **problem,
    )
    if layout == "bert":
        hf_config, name = tf.BertConfig(**_common(m, **task)), "Bert"
    elif layout in ("roberta", "roberta_prelayernorm"):
        kw = _common(m, max_position_embeddings=m.max_position + m.pad_token_id + 1, **task)
        if layout == "roberta":
            hf_config, name = tf.RobertaConfig(**kw), "Roberta"
        else:
            hf_config, name = tf.RobertaPreLayerNormConfig(**kw), "RobertaPreLayerNorm"
    elif layout == "albert":
        groups = len(_albert_groups(pretraining, m))
        kw = _common(m, embedding_size=m.embedding_width, num_hidden_groups=groups, **task)
        hf_config = tf.AlbertConfig(inner_group_num=1, classifier_dropout_prob=m.dropout, **kw)
        name = "Albert"
    else:
        hf_config = tf.ElectraConfig(**_common(m, embedding_size=m.embedding_width, **task))
        name = "Electra"
    return _load(getattr(tf, f"{name}For{kind}"), hf_config, weights)


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
    _readable_by_all(tmp)
    shutil.rmtree(output, ignore_errors=True)
    tmp.replace(output)
    return output
