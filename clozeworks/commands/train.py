"""Train a BERT-family model on a shard set, masking dynamically, with exact checkpoints.

Presets: bert-tiny ... bert-large (BERT paper sizes), roberta-base/large, albert-base/large,
electra-small/base, gpt2-small (causal LM, --objective clm), t5-small/base (T5 v1.1, span
corruption, --objective t5; its vocabulary needs `cloze vocab --sentinels 100`), xlnet-base
(permutation LM, --objective plm), each with
its paper's optimizer. A config file (TOML or JSON, e.g. the
run's own config.json) overrides the preset; flags override both. Multi-process:
`torchrun --nproc-per-node N -m clozeworks train ...` (DDP; NCCL on GPU, gloo on CPU).

A flag shown without a default takes the preset's (or the config file's) value;
`--print-config` prints every setting as it would be used, as JSON that --config reads.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from clozeworks.commands import add_progress_flag, progress_wanted
from clozeworks.corpus.outputs import check_apart
from clozeworks.schemas.errors import UsageError, signal_exit_code
from clozeworks.schemas.kinds import MASK_KINDS, PRECISIONS
from clozeworks.trainer.config import (
    COMMAND_LINE,
    Phase2Config,
    TrainConfig,
    load_config_file,
    merge,
    settings_from_pairs,
)
from clozeworks.trainer.data.mixture import is_mixture, parse_mixture
from clozeworks.trainer.data.targets import corrupted_lengths
from clozeworks.trainer.datasets import resolve
from clozeworks.trainer.families import FAMILIES
from clozeworks.trainer.loop import train
from clozeworks.trainer.objectives import with_pair_objective
from clozeworks.trainer.presets import MODEL_PRESETS, preset
from clozeworks.trainer.tracking import (
    TRACKERS,
    default_trackers,
    parse_trackers,
    require_installed,
)

HELP = "shards -> trained model run directory"
BEAM = False


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
    p.add_argument(
        "--objective",
        metavar="LIST",
        help="comma-separated: mlm,nsp,sop,sso,sbo,wso,rtd; clm (gpt), t5 (t5) or plm "
        "(xlnet) alone "
        "(default: the preset's)",
    )
    p.add_argument("--max-steps", type=int)
    p.add_argument("--batch-size", type=int, help="sequences per micro-batch per process")
    p.add_argument("--grad-accum", type=int, help="micro-batches per optimizer step")
    p.add_argument("--optim", choices=list(FAMILIES), help="a family's paper's optimizer settings")
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument(
        "--warmup",
        type=_warmup,
        metavar="SHARE|STEPS",
        help="warm-up as a share of the run (0.06 or 6%%) or in steps (10000)",
    )
    p.add_argument("--warmup-steps", type=int, help="warm-up in steps (as --warmup 10000)")
    p.add_argument(
        "--force-warmup",
        action="store_true",
        help="train even if the warm-up lasts the whole run",
    )
    p.add_argument("--masking", choices=MASK_KINDS, help="dynamic masking")
    p.add_argument("--save-every", type=int)
    p.add_argument("--keep", type=int, help="committed checkpoints to keep")
    p.add_argument("--log-every", type=int)
    p.add_argument("--eval-data", metavar="SOURCE", help="held-out shard set")
    p.add_argument(
        "--eval-split",
        type=_share,
        metavar="SHARE",
        help="hold out this share of --data for evaluation (0.005 or 0.5%%), never trained on",
    )
    p.add_argument("--eval-every", type=int, help="evaluate every N steps (default: at the end)")
    p.add_argument("--eval-batches", type=int, help="held-out batches per evaluation")
    p.add_argument("--phase2-data", metavar="SOURCE", help="second phase shards (BERT: length 512)")
    p.add_argument("--phase2-step", type=int, help="step the second phase starts at")
    p.add_argument("--phase2-batch-size", type=int)
    p.add_argument(
        "--init-from",
        metavar="DIR",
        help="start from these weights: a transformers directory (as cloze export writes), "
        "a run or a step directory; the architecture is theirs, the optimizer fresh",
    )
    p.add_argument("--seed", type=int)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"])
    p.add_argument(
        "--precision",
        choices=list(PRECISIONS),
        help="auto: bf16 on GPU, fp32 on CPU; fp16 (GPUs without bf16) scales the loss",
    )
    p.add_argument("--compile", action="store_true", help="torch.compile the encoders")
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="deterministic GPU kernels (somewhat slower): a resumed run ends bit-identical "
        "to an uninterrupted one on a GPU too, as it does on the CPU",
    )
    p.add_argument(
        "--fsdp",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="under torchrun: shard weights, gradients and optimizer state over the "
        "processes (FSDP) instead of a whole copy per process (DDP)",
    )
    p.add_argument(
        "--unpad",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the encoder on real tokens only when a batch has padding (default: on)",
    )
    p.add_argument(
        "--grad-checkpointing",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="recompute encoder layers in the backward pass: less memory, ~1/3 more compute",
    )
    p.add_argument("--num-workers", type=int, help="loader processes per rank (0: in process)")
    p.add_argument("--shuffle-buffer", type=int, help="sequences shuffled together per stream")
    p.add_argument(
        "--verify-shards",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="check each shard's sha256 before its first use",
    )
    p.add_argument(
        "--on-error",
        choices=["raise", "skip"],
        help="a damaged shard stops the run, or is skipped with a warning",
    )
    p.add_argument(
        "--shard-cache",
        metavar="DIR",
        help="where remote shards are kept (default $CLOZEWORKS_CACHE or ~/.cache/clozeworks)",
    )
    p.add_argument(
        "--shard-cache-gb",
        type=float,
        metavar="GB",
        help="most disk the shard cache may use (least recently used shards go first)",
    )
    trackers = p.add_mutually_exclusive_group()
    trackers.add_argument(
        "--report-to",
        type=_trackers,
        metavar="LIST",
        help=f"comma-separated trackers beside metrics.jsonl, from: {', '.join(TRACKERS)}; "
        "or none (default: tensorboard when installed); each an extra, configured by its own "
        "environment variables (WANDB_MODE=offline, MLFLOW_TRACKING_URI)",
    )
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


def _number(text: str, what: str) -> float:
    """ "0.06" or "6%" -> 0.06."""
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None


def _share(text: str) -> float:
    """A share of the data: "0.005" or "0.5%"."""
    value = _number(text, "a share")
    if not 0.0 <= value <= 0.5:
        raise argparse.ArgumentTypeError(f"must be between 0 and 50%: {text!r}")
    return value


def _warmup(text: str) -> float | int:
    """A share of the run ("0.06", "6%") or a number of steps ("10000")."""
    value = _number(text, "a share or a step count")
    if text.endswith("%"):
        return value
    if value >= 1 and value != int(value):
        raise argparse.ArgumentTypeError(f"steps must be whole: {text!r}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return int(value) if value >= 1 else value


def _warmup_settings(value: float | int | None) -> dict[str, object]:
    if value is None:
        return {}
    if isinstance(value, int):  # steps; a ratio from the preset or --config no longer applies
        return {"warmup_steps": value, "warmup_ratio": None}
    return {"warmup_ratio": value}


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    config = preset(args.preset)
    if args.optim:
        config = merge(config, {"optim": FAMILIES[args.optim].optim.__dict__}, "--optim")
    if args.config:
        config = load_config_file(Path(args.config), config)
    if args.set:
        config = merge(config, settings_from_pairs(args.set, "--set"), "--set")
    top = {
        "max_steps": args.max_steps,
        "batch_size": args.batch_size,
        "grad_accum": args.grad_accum,
        "save_every": args.save_every,
        "keep": args.keep,
        "log_every": args.log_every,
        "seed": args.seed,
        "init_from": args.init_from,
        "eval_data": args.eval_data,
        "eval_split": args.eval_split,
        "eval_every": args.eval_every,
        "eval_batches": args.eval_batches,
        "device": args.device,
        "precision": args.precision,
        "compile": args.compile or None,
        "deterministic": args.deterministic or None,
        "grad_checkpointing": args.grad_checkpointing,
        "unpad": args.unpad,
        "fsdp": args.fsdp,
        "num_workers": args.num_workers,
        "shuffle_buffer": args.shuffle_buffer,
        "verify_shards": args.verify_shards,
        "on_error": args.on_error,
        "shard_cache": args.shard_cache,
        "shard_cache_gb": args.shard_cache_gb,
        "report_to": args.report_to,
    }
    if args.data and is_mixture(args.data):
        top["mixture"] = parse_mixture(args.data)
    if args.objective:
        top["objectives"] = tuple(o.strip() for o in args.objective.split(",") if o.strip())
    if args.phase2_data or args.phase2_step:
        if not (args.phase2_data and args.phase2_step):
            raise UsageError("--phase2-data and --phase2-step go together")
        top["phase2"] = Phase2Config(args.phase2_data, args.phase2_step, args.phase2_batch_size)
    sections = {
        "optim": {
            "lr": args.lr,
            "force_warmup": args.force_warmup or None,
        },
        "masking": {"kind": args.masking},
    }
    changes: dict[str, object] = {k: v for k, v in top.items() if v is not None}
    warmup = args.warmup if args.warmup is not None else args.warmup_steps
    for name, values in sections.items():
        given = {k: v for k, v in values.items() if v is not None}
        if name == "optim":
            # Not filtered: steps clear a share that the preset or --config set.
            given.update(_warmup_settings(warmup))
        if given:
            changes[name] = given
    return merge(config, changes, COMMAND_LINE)


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
    if manifest.premask is not None and args.masking:
        raise UsageError(
            f"--masking {args.masking} cannot take effect: {data} is pre-masked "
            f"({manifest.premask.kind}) and trains with its stored masks"
        )
    untouched = config.objectives == preset(args.preset).objectives and not args.objective
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


def _trackers(text: str) -> tuple[str, ...]:
    """`--report-to`'s list (trainer.tracking.parse_trackers), its error said by argparse."""
    try:
        return parse_trackers(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
