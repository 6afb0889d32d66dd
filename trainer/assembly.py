"""A run's parts before its first step: the config as its shards and `--init-from` settle
it, the phases, the run directory's config.json, and the model on the device."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import nn

from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.schemas.manifest import Manifest
from clozeworks.schemas.sidecars import TOKENIZER_DIR
from clozeworks.trainer import fsdp, init_from
from clozeworks.trainer.config import TrainConfig
from clozeworks.trainer.data.source import tokenizer_files
from clozeworks.trainer.datasets import copy_tokenizer, resolve
from clozeworks.trainer.distill.parts import attach
from clozeworks.trainer.distill.teacher import (
    check_teacher,
    init_student,
    load_teacher,
    with_teacher_width,
)
from clozeworks.trainer.distributed import Dist
from clozeworks.trainer.families import build_model, described_model
from clozeworks.trainer.models.bert import Encoder, LayerStack
from clozeworks.trainer.objectives import check_objectives
from clozeworks.trainer.rundir import CONFIG_FILE
from clozeworks.trainer.tracking import default_trackers

# A run directory is not a dataset: its copy of the tokenizer keeps the plain name.
RUN_TOKENIZER_DIR = "tokenizer"


@dataclass(frozen=True)
class Phase:
    data: str  # a shard directory, its URL, or a list of shards (trainer.data.source)
    manifest: Manifest
    batch_size: int
    start_step: int


def mix_seed(*parts: int) -> int:
    """A 63-bit seed from integers (seed, step, micro-batch, rank): ELECTRA's sampling."""
    h = 0x9E3779B97F4A7C15
    for p in parts:
        h = ((h ^ (p & 0xFFFFFFFFFFFFFFFF)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        h ^= h >> 31
    return h & 0x7FFFFFFFFFFFFFFF


def settle_config(
    config: TrainConfig, data: str, d: Dist
) -> tuple[TrainConfig, list[Phase], dict[str, bytes], list[str]]:
    """The run's config as its shards and `--init-from` settle it (architecture, vocabulary,
    pad id), checked against every phase's shards; the phases, the shards' tokenizer files
    (read once: rank 0 keeps a copy, the init-from check needs tokenizer.json) and notes on
    the init-from source."""
    if config.report_to is None:
        config = replace(config, report_to=default_trackers())
    shards = resolve(config, data)
    phases = phases_of(config, data, shards.manifest)
    first = shards.manifest
    tokenizer = tokenizer_files(shards) if config.init_from or d.main else {}
    # Rank 0 decides, every rank raises: a run whose shards ship no usable tokenizer could
    # never be exported or decoded, so it is refused before step 1, as `inspect --verify`
    # refuses the set.
    problem = d.gather_json(_tokenizer_problem(shards.location, tokenizer) if d.main else None)
    if problem[0] is not None:
        raise BadInputError(problem[0])
    notes: list[str] = []
    if config.init_from:
        arch, notes = init_from.model_config(config.init_from, config.model)
        config = replace(config, model=arch)
        note = init_from.check_tokenizer(config.init_from, first, tokenizer.get("tokenizer.json"))
        notes += [note] if note else []
    if config.teacher:
        shards_json = tokenizer.get("tokenizer.json")
        if shards_json is None and not d.main:  # only rank 0 read the files
            shards_json = tokenizer_files(shards).get("tokenizer.json")
        note = init_from.check_tokenizer(config.teacher, first, shards_json, flag="--teacher")
        notes += [f"teacher: {note}"] if note else []
    model_config = replace(
        config.model, vocab_size=first.vocab_size, pad_token_id=first.special_tokens["pad"]
    )
    config = replace(config, model=model_config)
    if config.teacher:  # before anything is written: its architecture alone
        teacher = init_from.model_config(config.teacher, config.model)[0]
        check_teacher(config.teacher, teacher, config)
        config = with_teacher_width(config, teacher)
    for phase in phases:
        check_objectives(config, phase.manifest, phase.data)
    return config, phases, tokenizer, notes


def _tokenizer_problem(location: str, files: dict[str, bytes]) -> str | None:
    if "tokenizer.json" in files or "vocab.txt" in files:
        return None
    return (
        f"{location}: {TOKENIZER_DIR}/ has no tokenizer.json or vocab.txt, so a run on these "
        "shards could not be exported; copy the tokenizer the shards were made with there"
    )


def data_summary(phases: list[Phase]) -> list[str]:
    """A line per phase's shard set, from its manifest: what a model card says the model
    was trained on (the same wherever the shards lie)."""
    lines = []
    for phase in phases:
        m = phase.manifest
        documents = m.stats.get("shard.documents")
        source = f" from {documents:,} documents" if isinstance(documents, int) else ""
        lines.append(
            f"{m.sequences:,} {m.mode} sequences of up to {m.max_seq_len} tokens "
            f"({m.tokens:,} tokens{source}), {m.vocab_kind} vocabulary of {m.vocab_size:,}"
        )
    return lines


def write_run_config(
    run: Path, config: TrainConfig, data: str, tokenizer: dict[str, bytes], summary: list[str]
) -> None:
    run.mkdir(parents=True, exist_ok=True)
    payload = {**config.to_dict(), "data": data, "data_summary": summary}
    # The run keeps its own copy, so export works when the shards are remote or gone.
    payload["tokenizer"] = str(copy_tokenizer(tokenizer, run / RUN_TOKENIZER_DIR))
    (run / CONFIG_FILE).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def run_model(config: TrainConfig, d: Dist) -> tuple[nn.Module, bool]:
    """The model on the device, sharded over the ranks with FSDP when asked (before the
    optimizer: it must hold the sharded parameters), its layer stacks recomputing in the
    backward pass with grad checkpointing, its encoders compiled; whether it is sharded."""
    described_model(config, "the model configured")
    model = build_model(config)
    teacher = None
    if config.teacher:
        _, teacher = load_teacher(config.teacher)
        if not config.init_from:  # --init-from's weights replace these at step 0
            model.teacher_note = init_student(model, teacher)  # type: ignore[assignment]
    model = model.to(d.device)
    # Model weights come from `seed` alone; dropout differs per rank.
    torch.manual_seed(mix_seed(config.seed, d.rank, 0xD0))
    sharded = config.fsdp and d.active
    if sharded:
        fsdp.shard(model, Encoder, d.device, d.world_size)
    for module in model.modules():
        if isinstance(module, LayerStack):
            module.checkpointing = config.grad_checkpointing
    if teacher is not None:
        attach(model, teacher.to(d.device), config.temperature)
    if config.compile:
        # The encoders carry the FLOPs and have static shapes; the heads index with
        # data-dependent masks, which would only cause graph breaks.
        for module in model.modules():
            if isinstance(module, Encoder):
                module.compile()
    return model, sharded


def phases_of(config: TrainConfig, data: str, manifest: Manifest) -> list[Phase]:
    phases = [Phase(data, manifest, config.batch_size, 0)]
    if config.phase2 is not None:
        p2 = config.phase2
        if not 0 < p2.start_step < config.max_steps:
            raise UsageError(
                f"phase2.start_step {p2.start_step} must be between 0 and max_steps "
                f"{config.max_steps}"
            )
        manifest = resolve(config, p2.data).manifest
        batch = p2.batch_size or config.batch_size
        phases.append(Phase(p2.data, manifest, batch, p2.start_step))
    for phase in phases:
        if phase.manifest.max_seq_len > config.model.max_position:
            raise UsageError(
                f"{phase.data}: sequences of {phase.manifest.max_seq_len} tokens exceed the "
                f"model's {config.model.max_position} positions"
            )
    return phases
