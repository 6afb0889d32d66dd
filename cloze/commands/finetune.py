"""Fine-tune a pretrained model on a downstream task, as BERT's paper does for GLUE.

--run is a training run (its newest checkpoint, or --step N), a step directory, or a
transformers directory (`cloze export`'s output). --task is a built-in task (glue/cola,
glue/sst2, glue/mrpc, glue/qqp, glue/stsb, glue/mnli, glue/mnli-mm, glue/qnli, glue/rte,
glue/wnli: GLUE's TSV files in --data, as its download script writes them) or a TOML task
file (columns, labels and metrics of your JSONL, CSV or TSV files; docs/design.md). The
defaults are BERT's recipe: batch 32, learning rate 2e-5, 3 epochs, 10% warm-up, linear
decay; --sweep tries BERT's learning rates and keeps the best on dev. The dev split is
scored after every epoch; the model, its task and the scores go
to --output (finetune.json, eval.json), which `cloze evaluate` and `cloze export` read.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from clozeworks.commands import add_progress_flag, progress_wanted
from clozeworks.trainer.finetune.run import SWEEP_LEARNING_RATES, run_finetune
from clozeworks.trainer.finetune.tasks import load_task
from clozeworks.trainer.finetune.train import FinetuneSettings

HELP = "run or export + task -> fine-tuned model with dev scores"
BEAM = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_progress_flag(p)
    p.add_argument("--run", required=True, metavar="RUN_OR_EXPORT", help="pretrained model")
    p.add_argument("--task", required=True, metavar="TASK", help="glue/NAME or a task .toml")
    p.add_argument("--data", required=True, metavar="DIR", help="directory of the task's files")
    p.add_argument("--output", required=True, metavar="DIR", help="fine-tuned model to write")
    p.add_argument("--step", type=int, help="checkpoint of --run (default: the newest)")
    d = FinetuneSettings()
    p.add_argument("--lr", type=float, default=d.learning_rate, help="peak learning rate")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="examples per step")
    p.add_argument("--epochs", type=int, default=d.epochs, help="passes over train")
    p.add_argument("--warmup", type=float, default=d.warmup, help="share of steps warming up")
    p.add_argument("--weight-decay", type=float, default=d.weight_decay, help="AdamW decay")
    p.add_argument("--max-seq-len", type=int, default=d.max_seq_len, help="tokens per example")
    p.add_argument("--seed", type=int, default=d.seed, help="head init, order and dropout")
    p.add_argument("--device", default=d.device, help="auto, cpu, cuda, cuda:N")
    p.add_argument(
        "--sweep",
        action="store_true",
        help="one run per learning rate of BERT's grid (5e-5, 4e-5, 3e-5, 2e-5); keep the best "
        "on dev",
    )
    p.add_argument(
        "--random-init",
        action="store_true",
        help="only the architecture and tokenizer of --run, weights from --seed: the baseline",
    )
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty --output")


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    settings = FinetuneSettings(
        learning_rate=args.lr,
        batch_size=args.batch_size,
        epochs=args.epochs,
        warmup=args.warmup,
        weight_decay=args.weight_decay,
        max_seq_len=args.max_seq_len,
        seed=args.seed,
        device=args.device,
    )
    spec = load_task(args.task)
    info = run_finetune(
        Path(args.run),
        spec,
        Path(args.data),
        Path(args.output),
        settings,
        step=args.step,
        overwrite=args.overwrite,
        progress=progress_wanted(args),
        sweep=SWEEP_LEARNING_RATES if args.sweep else (),
        random_init=args.random_init,
    )
    for trial in info.get("sweep", []):
        print(f"lr {trial['learning_rate']:g}: dev {json.dumps(trial['dev'])}")
    for epoch in info["epochs"]:
        dev = epoch.get("dev")
        scores = "" if dev is None else " " + json.dumps({k: round(v, 2) for k, v in dev.items()})
        print(f"epoch {epoch['epoch']}: train loss {epoch['train_loss']:.4f}{scores}")
    print(
        f"fine-tuned on {info['examples']['train']} examples "
        f"({info['train_examples_per_second']:.1f}/s) -> {args.output}"
    )
    return 0
