"""Train a BERT-family model on a shard set, masking dynamically, with exact checkpoints.

Presets follow the BERT paper's sizes (bert-tiny ... bert-large). A JSON config file (as the
run's own config.json) overrides the preset; flags override both.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from schemas.errors import BadInputError
from trainer.config import MODEL_PRESETS, TrainConfig, override, preset
from trainer.loop import train

HELP = "shards -> trained model run directory"
BEAM = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, metavar="DIR", help="shard directory")
    p.add_argument("--output", required=True, metavar="DIR", help="run directory")
    p.add_argument("--preset", choices=list(MODEL_PRESETS), default="bert-tiny")
    p.add_argument("--config", metavar="FILE", help="JSON config overriding the preset")
    p.add_argument("--objective", default="mlm", help="comma-separated objectives (mlm now)")
    p.add_argument("--max-steps", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument("--warmup-steps", type=int)
    p.add_argument("--save-every", type=int)
    p.add_argument("--keep", type=int, help="committed checkpoints to keep")
    p.add_argument("--log-every", type=int)
    p.add_argument("--eval-data", metavar="DIR", help="held-out shard set (not used yet)")
    p.add_argument("--seed", type=int)
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    config = preset(args.preset)
    if args.config:
        path = Path(args.config)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            config = TrainConfig.from_dict({**config.to_dict(), **data})
        except (OSError, ValueError, TypeError) as err:
            raise BadInputError(f"{path}: cannot use this config ({err})") from None
    top = {
        "max_steps": args.max_steps,
        "batch_size": args.batch_size,
        "save_every": args.save_every,
        "keep": args.keep,
        "log_every": args.log_every,
        "seed": args.seed,
    }
    config = override(config, "", **{k: v for k, v in top.items() if v is not None})
    optim = {"lr": args.lr, "warmup_steps": args.warmup_steps}
    config = override(config, "optim", **{k: v for k, v in optim.items() if v is not None})
    objectives = tuple(o.strip() for o in args.objective.split(",") if o.strip())
    return override(config, "", objectives=objectives)


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    config = config_from_args(args)
    summary = train(
        config,
        Path(args.data),
        Path(args.output),
        resume=args.resume,
        progress=not args.no_progress,
    )
    print(
        f"trained {summary.steps} steps in {summary.seconds:.1f}s: MLM loss "
        f"{summary.first_mlm_loss:.3f} -> {summary.last_mlm_loss:.3f}; run in {args.output}"
    )
    return 0
