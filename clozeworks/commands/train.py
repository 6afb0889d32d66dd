"""Train a BERT-family model on a shard set, masking dynamically, with exact checkpoints.

Presets: bert-tiny ... bert-large (BERT paper sizes), roberta-base/large, albert-base/large,
electra-small/base, gpt2-small (causal LM, --objective clm), t5-small/base (T5 v1.1, span
corruption, --objective t5; its vocabulary needs `cloze vocab --sentinels 100`), xlnet-base
(permutation LM, --objective plm), bart-base/large (denoising, --objective bart, on
doc-sentences shards), each with
its paper's optimizer. A config file (TOML or JSON, e.g. the
run's own config.json) overrides the preset; flags override both. Multi-process:
`torchrun --nproc-per-node N -m clozeworks train ...` (DDP; NCCL on GPU, gloo on CPU).

A flag shown without a default takes the preset's (or the config file's) value;
`--print-config` prints every setting as it would be used, as JSON that --config reads.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

from clozeworks.commands import add_progress_flag, progress_wanted
from clozeworks.commands.flags import add_settings, settings_from
from clozeworks.corpus.outputs import check_apart
from clozeworks.schemas.errors import UsageError, signal_exit_code
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.schemas.overlay import pairs_table
from clozeworks.trainer.bucket_run import BucketRun, is_url
from clozeworks.trainer.config import (
    COMMAND_LINE,
    OptimConfig,
    Phase2Config,
    TrainConfig,
    load_config_file,
    merge,
    parse_share,
)
from clozeworks.trainer.data.mixture import is_mixture, parse_mixture
from clozeworks.trainer.data.targets import corrupted_lengths
from clozeworks.trainer.datasets import resolve
from clozeworks.trainer.families import FAMILIES
from clozeworks.trainer.loop import TrainSummary, train
from clozeworks.trainer.objectives import with_pair_objective, with_teacher_objectives
from clozeworks.trainer.presets import MODEL_PRESETS, preset
from clozeworks.trainer.tracking import default_trackers, require_installed

HELP = "shards -> trained model run directory"
BEAM = False


# The settings of a run that are flags here: the top level's by name, a section's where
# its field names a flag (optim.lr is --lr); every other is reached by --set or --config.
FLAGGED = (
    ("", TrainConfig),
    ("optim", OptimConfig),
    ("masking", MaskingSettings),
    ("phase2", Phase2Config),
)
# Not settings of their own: the data names the mixture, and phase2 is its three flags.
_NOT_FLAGS = frozenset({"mixture", "report_to"})
# The module's help says it once: a flag's default is the preset's or the config file's.
_PRESET_DEFAULT = ""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data",
        metavar="SOURCE",
        help="shard directory or its URL (https://, s3://, gs://), or a list of shards "
        "('pipe:CMD ... shard-{000000..000009}.tar'), or a mixture by weight "
        "(wiki=0.6,books=0.4); required to train unless the config has a [mixture]",
    )
    p.add_argument("--output", metavar="DIR", help="run directory (required to train)")
    p.add_argument(
        "--print-config",
        action="store_true",
        help="print the effective configuration (preset + --config + flags) as JSON and exit",
    )
    p.add_argument("--preset", choices=list(MODEL_PRESETS), default="bert-tiny")
    p.add_argument("--config", metavar="FILE", help="TOML or JSON overriding the preset")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any setting of the TOML, e.g. model.hidden_size=256 or objectives=['mlm'] "
        "(a TOML value; a bare word is a string); after --config, before the other flags",
    )
    p.add_argument("--optim", choices=list(FAMILIES), help="a family's paper's optimizer settings")
    # One flag for either of two settings: a share of the run (warmup_ratio) or steps.
    p.add_argument(
        "--warmup",
        type=_warmup,
        metavar="SHARE|STEPS",
        help="warm-up as a share of the run (0.06 or 6%%) or in steps (10000)",
    )
    for section, cls in FLAGGED:
        add_settings(
            p,
            cls,
            with_defaults=False,
            skip=_NOT_FLAGS,
            section=section,
            default_said=_PRESET_DEFAULT,
        )
    trackers = p.add_mutually_exclusive_group()
    add_settings(trackers, TrainConfig, with_defaults=False, only=frozenset({"report_to"}))
    trackers.add_argument(
        "--no-tensorboard",
        dest="report_to",
        action="store_const",
        const=(),
        help="the same as --report-to none (the switch before --report-to)",
    )
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace the run already in --output")
    add_progress_flag(p, "a progress bar")


def _warmup(text: str) -> float | int:
    """A share of the run ("0.06", "6%") or a number of steps ("10000")."""
    try:
        value = parse_share(text, "a share or a step count")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if text.endswith("%"):
        return value
    if value >= 1 and value != int(value):
        raise argparse.ArgumentTypeError(f"steps must be whole: {text!r}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return int(value) if value >= 1 else value


def _given(args: argparse.Namespace) -> dict[str, object]:
    """The settings the flags give, as a config file would: {name: value} and
    {section: {name: value}}; a warm-up in steps clears a share that the preset or
    --config set (the share would win)."""
    changes: dict[str, object] = {}
    for section, cls in FLAGGED:
        given = {k: v for k, v in settings_from(args, cls, section).items() if v is not None}
        if section:
            if given:
                changes[section] = given
        else:
            changes.update(given)
    if args.report_to is not None:
        changes["report_to"] = args.report_to
    optim = changes.setdefault("optim", {})
    assert isinstance(optim, dict)
    if isinstance(args.warmup, float):
        optim["warmup_ratio"] = args.warmup
    elif args.warmup is not None:
        optim["warmup_steps"] = args.warmup
    if "warmup_steps" in optim:
        optim["warmup_ratio"] = None
    if not optim:
        del changes["optim"]
    if args.data and is_mixture(args.data):
        changes["mixture"] = parse_mixture(args.data)
    return changes


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The preset, then --optim, --config and --set, then the other flags."""
    config = preset(args.preset)
    if args.optim:
        config = merge(config, {"optim": FAMILIES[args.optim].optim.__dict__}, "--optim")
    if args.config:
        config = load_config_file(Path(args.config), config)
    if args.set:
        config = merge(config, pairs_table(args.set, "--set"), "--set")
    changes = _given(args)
    phase2 = changes.get("phase2")
    if (
        isinstance(phase2, dict)
        and config.phase2 is None
        and not {"data", "start_step"} <= set(phase2)
    ):
        raise UsageError("--phase2-data and --phase2-step go together")
    config = merge(config, changes, COMMAND_LINE)
    if not args.objectives and config.objectives == preset(args.preset).objectives:
        config = with_teacher_objectives(config)
    return config


def _note(line: str) -> None:
    print(line, file=sys.stderr)


def _no_note(line: str) -> None:
    return None


def _fit_to_shards(
    config: TrainConfig, args: argparse.Namespace, data: str, quiet: bool = False
) -> TrainConfig:
    """Settings that the shard set decides: refuse dynamic masking flags on pre-masked
    shards, train a sentence pair set's own objective unless told otherwise, and take the
    set's vocabulary size and pad id (as the run's own settle_config does). `quiet`: no
    notes on stderr (--print-config prints the config alone)."""
    say = _note if not quiet else _no_note
    manifest = resolve(config, data).manifest
    config = replace(
        config,
        model=replace(
            config.model,
            vocab_size=manifest.vocab_size,
            pad_token_id=manifest.special_tokens["pad"],
        ),
    )
    masking = getattr(args, "masking.kind")
    if manifest.premask is not None and masking:
        raise UsageError(
            f"--masking {masking} cannot take effect: {data} is pre-masked "
            f"({manifest.premask.kind}) and trains with its stored masks"
        )
    untouched = config.objectives == preset(args.preset).objectives and not args.objectives
    if config.teacher and not args.objectives:
        say(f"objectives: {','.join(config.objectives)} (DistilBERT's loss from --teacher)")
    fitted = with_pair_objective(config, manifest) if untouched else config
    if fitted is not config:
        config = fitted
        say(
            f"objectives: mlm,{manifest.mode} ({data} holds {manifest.mode} pairs; "
            "--objective mlm trains MLM alone)"
        )
    if "t5" in config.objectives:
        raw = manifest.max_seq_len - 2  # between the rows' [CLS] and [SEP]
        inputs, targets = corrupted_lengths(raw)
        say(
            f"t5: rows of {raw} tokens -> inputs of {inputs}, targets of {targets} "
            "(T5's 512 and 114 come from shards built with --max-seq-len 570)"
        )
    return config


def _train_on_bucket(config: TrainConfig, data: str, args: argparse.Namespace) -> TrainSummary:
    """A run kept on a bucket (`trainer.bucket_run`): rank 0 holds the bucket's lock,
    builds the local mirror and sends each committed checkpoint up; every rank trains in
    the mirror (one machine: torchrun's ranks share its disk)."""
    from clozeworks.corpus.locks import OutputLock
    from clozeworks.pipelines.plumbing.beamfs import BEAM_FS

    bucket = BucketRun(args.output)
    main_rank = int(os.environ.get("RANK", "0")) == 0
    lock = OutputLock(BEAM_FS, args.output, "train") if main_rank else None
    try:
        if lock is not None:
            lock.acquire()
            bucket.prepare(args.resume, args.overwrite)
        summary = train(
            config,
            data,
            bucket.local,
            resume=args.resume,
            progress=progress_wanted(args),
            on_commit=bucket.push_step if main_rank else None,
        )
        if main_rank:
            bucket.push_files()
        return summary
    finally:
        if lock is not None:
            lock.release()


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    config = config_from_args(args)
    # A [mixture] in the config names the data; its first set stands for all in messages.
    data = next(iter(config.mixture)) if config.mixture else args.data
    if config.report_to is None:
        config = replace(config, report_to=default_trackers())
    require_installed(config.report_to)
    if args.print_config:
        # With shards, what the run will use: their vocabulary, pad id and pair objective.
        print(
            (_fit_to_shards(config, args, data, quiet=True) if data else config).to_json(), end=""
        )
        return 0
    missing = [flag for flag, value in (("--data", data), ("--output", args.output)) if not value]
    if missing:
        raise UsageError(f"the following arguments are required: {', '.join(missing)}")
    sources = [*(config.mixture or {}), *([args.data] if args.data else [])]
    check_apart({"output": args.output}, {"data": sources})
    config = _fit_to_shards(config, args, data)
    if is_url(args.output):
        summary = _train_on_bucket(config, data, args)
    else:
        summary = train(
            config,
            data,
            Path(args.output),
            resume=args.resume,
            progress=progress_wanted(args),
            overwrite=args.overwrite,
        )
    if summary.stopped_by:  # every rank stops, and says so the same way
        return signal_exit_code(summary.stopped_by)
    if summary.rank != 0 or summary.first_loss is None or summary.last_loss is None:
        return 0  # another rank reports, or there was nothing left to train
    done = summary.steps - summary.resumed_from
    line = f"trained {done} steps in {summary.seconds:.1f}s"
    if summary.resumed_from:
        line += f" (from step {summary.resumed_from} to {summary.steps})"
    name = summary.objective
    line += f": {name.upper()} loss {summary.first_loss:.3f} -> {summary.last_loss:.3f}"
    if summary.eval:
        accuracy = summary.eval.get(f"eval_{name}_accuracy", 0)
        line += f"; held-out {name.upper()} accuracy {accuracy:.3f}"
    print(f"{line}; run in {args.output}")
    return 0
