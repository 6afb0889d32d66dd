"""Which objectives a run trains, checked against its model family and its shards, and how
many predictions each makes in a batch.

Objectives (`TrainConfig.objectives`, `schemas.kinds.Objective`): `mlm`; one sentence
objective `nsp` / `sop` / `sso` (pair shards of that mode); `sbo` (SpanBERT, span masking);
`wso` (StructBERT's word structure); `rtd` (ELECTRA); and the generative families' own
`clm`, `t5` and `plm`. What each family may train is its registry entry's
(trainer/families.py); each objective's head and loss is its registry entry's head part
(trainer/data/objective_specs.py, trainer/head_parts.py).
"""

from __future__ import annotations

from dataclasses import replace

from clozeworks.schemas.errors import UsageError
from clozeworks.schemas.kinds import SENTENCE_OBJECTIVES
from clozeworks.schemas.manifest import Manifest
from clozeworks.trainer.config import TrainConfig
from clozeworks.trainer.data.objective_specs import TEACHER_OBJECTIVES, check_running_text
from clozeworks.trainer.families import FAMILIES, family_of

# What a teacher adds to an MLM run unless told otherwise: DistilBERT's triple loss is mlm
# and these.
DISTILBERT_OBJECTIVES = ("kd", "cos")


def check_objectives(config: TrainConfig, manifest: Manifest, source: str) -> None:
    """UsageError unless the model family and the shard set can train `config.objectives`."""
    objectives, family = config.objectives, family_of(config.model)
    running = {o for f in FAMILIES.values() if f.running_text for o in f.objectives}
    if family.running_text or running & set(objectives):
        check_running_text_family(config, manifest, source)
        return
    taught = [o for o in objectives if o in TEACHER_OBJECTIVES]
    if taught and not config.teacher:
        raise UsageError(f"{' and '.join(taught)} learn from a teacher: give --teacher")
    # TinyBERT's stages learn from the teacher alone (att,hid; then kd).
    if "mlm" not in objectives and len(taught) < len(objectives):
        raise UsageError(
            f"objectives {','.join(objectives)}: every family trains with mlm, or learns from "
            f"a teacher alone ({', '.join(TEACHER_OBJECTIVES)})"
        )
    sentence = [o for o in objectives if o in SENTENCE_OBJECTIVES]
    if len(sentence) > 1:
        raise UsageError(f"choose one sentence objective, not {', '.join(sentence)}")
    if sentence and manifest.mode != sentence[0]:
        raise UsageError(
            f"objective {sentence[0]} needs shards built with --mode {sentence[0]}; "
            f"{source} holds {manifest.mode} sequences"
        )
    if sentence and not family.sentence:
        those = " or ".join(n for n, f in FAMILIES.items() if f.sentence)
        raise UsageError(f"{family.name} has no sentence objective; use {those} for {sentence[0]}")
    if family.exact and set(objectives) != set(family.objectives):
        raise UsageError(f"{family.name} trains with exactly {' and '.join(family.objectives)}")
    for objective in objectives:
        if objective not in family.trains:
            those = " or ".join(n for n, f in FAMILIES.items() if objective in f.trains)
            raise UsageError(f"{objective} needs the {those} family")
    premask = manifest.premask
    kind = premask.kind if premask is not None else config.masking.kind
    if "sbo" in objectives and kind != "span":
        raise UsageError(f"sbo predicts masked spans; use span masking (the masking is {kind})")


def check_running_text_family(config: TrainConfig, manifest: Manifest, source: str) -> None:
    """The gpt, t5, xlnet and bart families train their own objective alone, on unmasked
    running text."""
    family, objectives = family_of(config.model), config.objectives
    if not family.running_text or objectives != family.objectives:
        wanted = ", ".join(
            f"{n} trains {','.join(f.objectives)}" for n, f in FAMILIES.items() if f.running_text
        )
        raise UsageError(
            f"objectives {','.join(objectives)} with family {family.name}: {wanted}, alone"
        )
    check_running_text(objectives, manifest, source)


def with_teacher_objectives(config: TrainConfig) -> TrainConfig:
    """`config` training DistilBERT's triple loss when a teacher is given and the
    objectives are MLM alone."""
    if config.teacher and config.objectives == ("mlm",):
        return replace(config, objectives=("mlm", *DISTILBERT_OBJECTIVES))
    return config


def with_pair_objective(config: TrainConfig, manifest: Manifest) -> TrainConfig:
    """`config` training its shard set's sentence objective too, when it would otherwise
    train BERT or ALBERT with MLM alone on pairs (what the pairs are for: `mlm,nsp` on nsp
    shards, as BERT did)."""
    pairs = manifest.mode in SENTENCE_OBJECTIVES and family_of(config.model).sentence
    if pairs and config.objectives == ("mlm",):
        return replace(config, objectives=("mlm", manifest.mode))
    return config
