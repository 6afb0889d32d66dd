"""What each pretraining objective asks of the data, one entry per objective.

An entry says how many predictions the objective makes in a host batch (the loop
normalizes each loss by its count over the global batch), which target maker builds its
labels when it makes its own from running text (`clm`, `t5`, `plm`, `bart`) instead of
masking, whether its shards must be of its own mode (the sentence objectives) or of
certain packed modes (`bart`: doc-sentences), whether it needs
dynamic masking (`sbo`, `wso` add fields the masker makes), and whether a held-out
perplexity is reported for it (the language-model losses). An entry also names the
head part it adds to the encoder-with-heads model (trainer/head_parts.py); which other
family trains which objective is the family registry's (trainer/families.py). The names
are `schemas.kinds.Objective`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from clozeworks.corpus.shards.masking import IGNORE_INDEX
from clozeworks.schemas.errors import UsageError
from clozeworks.schemas.kinds import OBJECTIVES, PACKED_MODES, SENTENCE_OBJECTIVES, PackedMode
from clozeworks.schemas.manifest import Manifest
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.batch_index import WSO_LABELS
from clozeworks.trainer.data.denoising import Denoising
from clozeworks.trainer.data.permutation import PermutationTargets
from clozeworks.trainer.data.source import Source, checked_tokenizer, mask_tables, sentinel_ids
from clozeworks.trainer.data.targets import CausalTargets, SpanCorruption

Batch = dict[str, torch.Tensor]
# A target maker from (shards, tokenizer path, tokenizer sha256, masking settings).
TargetMaker = Callable[[Source, "str | Path | None", "str | None", MaskingSettings], Any]


def _predicted(batch: Batch) -> int:
    return int((batch["labels"] != IGNORE_INDEX).sum())


def _real_tokens(batch: Batch) -> int:
    return int(batch["attention_mask"].sum())


def _attention_pairs(batch: Batch) -> int:
    # The (query, key) pairs of real tokens within each row.
    lengths = batch["attention_mask"].sum(1)
    return int((lengths * lengths).sum())


def _wso_labels(batch: Batch) -> int:
    return int((batch[WSO_LABELS] != IGNORE_INDEX).sum()) if WSO_LABELS in batch else 0


def _sequences(batch: Batch) -> int:
    return int(batch["input_ids"].shape[0])


def _causal(shards: Source, tokenizer: Any, sha: str | None, masking: MaskingSettings) -> Any:
    checked_tokenizer(shards, tokenizer, sha)  # no tables to build
    return CausalTargets()


def _span_corruption(
    shards: Source, tokenizer: Any, sha: str | None, masking: MaskingSettings
) -> Any:
    special = shards.manifest.special_tokens
    sentinels = sentinel_ids(shards, tokenizer, sha)
    return SpanCorruption(torch.tensor(sentinels), special["sep"], special["pad"])


def _permutation(shards: Source, tokenizer: Any, sha: str | None, masking: MaskingSettings) -> Any:
    tables = mask_tables(shards, tokenizer, sha, masking.kind != "token", False)
    return PermutationTargets(tables, masking)


def _denoising(shards: Source, tokenizer: Any, sha: str | None, masking: MaskingSettings) -> Any:
    tables = mask_tables(shards, tokenizer, sha, True, False)
    special = shards.manifest.special_tokens
    checked = checked_tokenizer(shards, tokenizer, sha)
    stop = None if checked is None else checked.tokenizer.token_to_id(FULL_STOP)
    return Denoising(tables, stop, special["pad"], special["sep"])


# BART's sentences end after a full stop token, as fairseq finds them in GPT-2's ids.
FULL_STOP = "."
# Named, not imported: the heads sit above the data in the trainer's layers.
_PARTS = "clozeworks.trainer.head_parts"
_DISTILL = "clozeworks.trainer.distill.parts"


@dataclass(frozen=True)
class ObjectiveSpec:
    name: str
    # Predictions the objective makes in a host batch.
    count: Callable[[Batch], int]
    # Its own targets from unmasked running text, made by this (None: masked tokens).
    targets: TargetMaker | None = None
    # Needs shards of its own mode (sentence pairs of that kind).
    own_mode: bool = False
    # Adds fields the dynamic masker makes: refused on pre-masked shards.
    dynamic_masking: bool = False
    # Its loss is a language model's: a held-out perplexity is reported.
    perplexity: bool = False
    # What it adds to the encoder-with-heads model (BERT, RoBERTa, ALBERT), as
    # `module:NAME` of a trainer.head_parts.HeadPart: its module, name and loss. Empty: a
    # family's own model makes its loss (rtd, clm, t5, plm, bart).
    head: str = ""
    # Learns from a teacher's outputs (--teacher).
    from_teacher: bool = False
    # The packed modes it reads when it makes its own targets.
    modes: tuple[PackedMode, ...] = PACKED_MODES


OBJECTIVE_SPECS: dict[str, ObjectiveSpec] = {
    spec.name: spec
    for spec in (
        ObjectiveSpec("mlm", _predicted, perplexity=True, head=f"{_PARTS}:MLM"),
        *(
            ObjectiveSpec(name, _sequences, own_mode=True, head=f"{_PARTS}:{name.upper()}")
            for name in SENTENCE_OBJECTIVES
        ),
        ObjectiveSpec("sbo", _predicted, dynamic_masking=True, head=f"{_PARTS}:SBO"),
        ObjectiveSpec("wso", _wso_labels, dynamic_masking=True, head=f"{_PARTS}:WSO"),
        ObjectiveSpec("kd", _predicted, head=f"{_DISTILL}:KD", from_teacher=True),
        ObjectiveSpec("cos", _real_tokens, head=f"{_DISTILL}:COS", from_teacher=True),
        ObjectiveSpec("att", _attention_pairs, head=f"{_DISTILL}:ATT", from_teacher=True),
        ObjectiveSpec("hid", _real_tokens, head=f"{_DISTILL}:HID", from_teacher=True),
        ObjectiveSpec("rtd", _real_tokens),
        ObjectiveSpec("clm", _predicted, targets=_causal, perplexity=True),
        ObjectiveSpec("t5", _predicted, targets=_span_corruption, perplexity=True),
        ObjectiveSpec("plm", _predicted, targets=_permutation, perplexity=True),
        # Sentence permutation moves a document's sentences: rows never cross documents.
        ObjectiveSpec(
            "bart", _predicted, targets=_denoising, perplexity=True, modes=("doc-sentences",)
        ),
    )
}
assert tuple(OBJECTIVE_SPECS) == OBJECTIVES, "one entry per schemas.kinds.Objective, in order"

# Objectives that make their own targets from running text.
OWN_TARGETS = tuple(name for name, spec in OBJECTIVE_SPECS.items() if spec.targets)
# Objectives with a held-out perplexity.
PERPLEXITY = tuple(name for name, spec in OBJECTIVE_SPECS.items() if spec.perplexity)
# Objectives learned from a teacher.
TEACHER_OBJECTIVES = tuple(name for name, spec in OBJECTIVE_SPECS.items() if spec.from_teacher)
# Objectives the encoder-with-heads model trains (a head part each).
ENCODER_HEADS = tuple(name for name, spec in OBJECTIVE_SPECS.items() if spec.head)


def objective_counts(batch: Batch, objectives: Sequence[str]) -> list[int]:
    """How many predictions each objective makes on `batch`, in `objectives` order.

    The loop sums these over micro-batches and ranks before the backward passes, so that
    every objective's loss is normalized by its count in the whole global batch: gradient
    accumulation and DDP then give the gradient of one big batch.
    """
    return [OBJECTIVE_SPECS[o].count(batch) for o in objectives]


def target_maker(objectives: Sequence[str]) -> TargetMaker | None:
    """The maker of the first objective in `objectives` that makes its own targets."""
    for name in objectives:
        if OBJECTIVE_SPECS[name].targets is not None:
            return OBJECTIVE_SPECS[name].targets
    return None


def check_shards(objectives: Sequence[str], manifest: Manifest, source: str) -> None:
    """UsageError unless `manifest`'s shards can feed `objectives`: a sentence objective's
    own mode, unmasked running text for those that make their own targets, and dynamic
    masking for those that need the masker's fields."""
    for name in objectives:
        if OBJECTIVE_SPECS[name].own_mode and manifest.mode != name:
            raise UsageError(
                f"objective {name} needs shards built with --mode {name}; {source} holds "
                f"{manifest.mode}"
            )
    check_running_text(objectives, manifest, source)
    dynamic = [o for o in objectives if OBJECTIVE_SPECS[o].dynamic_masking]
    if manifest.premask is not None and dynamic:
        need = "needs" if len(dynamic) == 1 else "need"
        raise UsageError(
            f"{source} is pre-masked; {' and '.join(dynamic)} {need} dynamic masking "
            "(build the shards without --premask)"
        )


def check_running_text(objectives: Sequence[str], manifest: Manifest, source: str) -> None:
    """UsageError unless shards that clm, t5 or plm (when asked for) read are unmasked
    running text."""
    own = [o for o in OWN_TARGETS if o in objectives]
    if not own:
        return
    names = ", ".join(own)
    if manifest.premask is not None:
        raise UsageError(f"{names} makes its own targets; {source} is pre-masked")
    for name in own:
        modes = OBJECTIVE_SPECS[name].modes
        if manifest.mode not in modes:
            held = "pairs" if manifest.mode not in PACKED_MODES else "rows"
            raise UsageError(
                f"{name} reads running text: shards built with --mode {' / '.join(modes)}; "
                f"{source} holds {manifest.mode} {held}"
            )
