"""Score a fine-tuned model (`cloze finetune`'s output) on one split of its task's files.

The scores (the task's metrics as the benchmark defines them) are printed as JSON and
added to MODEL/eval.json under the split's name. --task scores on another task of the
same labels (say glue/mnli-mm for a model tuned on glue/mnli).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from clozeworks.commands.flags import add_settings
from clozeworks.trainer.finetune.run import run_evaluate
from clozeworks.trainer.finetune.tasks import load_task
from clozeworks.trainer.finetune.train import FinetuneSettings

HELP = "fine-tuned model + task files -> scores (eval.json)"
BEAM = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="DIR", help="fine-tuned model directory")
    p.add_argument("--data", required=True, metavar="DIR", help="directory of the task's files")
    p.add_argument("--split", default="dev", help="which of the task's files to score")
    p.add_argument(
        "--task", metavar="TASK", help="glue/NAME or a task .toml (default: the model's)"
    )
    p.add_argument("--batch-size", type=int, default=128, help="examples per forward pass")
    add_settings(p, FinetuneSettings, only=frozenset({"device"}))


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    spec = load_task(args.task) if args.task else None
    scores = run_evaluate(
        Path(args.model), Path(args.data), args.split, spec, args.batch_size, args.device
    )
    print(json.dumps({"split": args.split, **scores}))
    return 0
