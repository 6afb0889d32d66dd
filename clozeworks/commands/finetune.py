"""Fine-tune a pretrained model on a downstream task, as BERT's paper does for GLUE.

--run is a training run (its newest checkpoint, or --step N), a step directory, or a
transformers directory (`cloze export`'s output). --task is a built-in task (glue/cola,
glue/sst2, glue/mrpc, glue/qqp, glue/stsb, glue/mnli, glue/mnli-mm, glue/qnli, glue/rte,
glue/wnli: GLUE's TSV files in --data, as its download script writes them; conll2003: its
train.txt / valid.txt column files, NER with entity-level F1; squad, squad2: SQuAD's
JSON, exact match and F1) or a TOML task file (columns, labels and metrics of your JSONL,
CSV, TSV, CoNLL or SQuAD-style files; docs/finetune.md). The learning rate, batch and
epochs are a recipe's (--recipe): BERT's (2e-5, 32, 3) for models of hidden size above 512,
a small model's (5e-4, 16, 10) up to it; 10% warm-up, linear decay; --sweep
tries the recipe's learning rates and keeps the best on dev. The dev split is scored after
every epoch, and a line per epoch goes to stderr as it ends; the
model, its task and the scores go to --output (finetune.json, eval.json), which `cloze
evaluate` and `cloze export` read.

Several --task (each with its --data) train one encoder with a head per task on batches of
all of them, each task sampled in proportion to its size (MT-DNN); --then-finetune then
fine-tunes each task's model on its task alone. Each task's model goes to OUTPUT/<task>/
(glue/mrpc -> OUTPUT/glue-mrpc), a summary to OUTPUT/multitask.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from clozeworks.commands import add_progress_flag, progress_wanted
from clozeworks.commands.flags import add_settings, settings_from
from clozeworks.corpus.locks import OutputLock
from clozeworks.corpus.outputs import LOCAL, check_apart
from clozeworks.schemas.errors import UsageError
from clozeworks.trainer.finetune.run import RECIPE_SWEEP, run_finetune, run_multitask
from clozeworks.trainer.finetune.tasks import load_task
from clozeworks.trainer.finetune.train import FinetuneSettings

HELP = "run or export + task -> fine-tuned model with dev scores"
BEAM = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_progress_flag(p)
    p.add_argument("--run", required=True, metavar="RUN_OR_EXPORT", help="pretrained model")
    p.add_argument(
        "--task",
        required=True,
        action="append",
        metavar="TASK",
        help="glue/NAME, conll2003, squad, squad2 or a task .toml; several: MT-DNN",
    )
    p.add_argument(
        "--data",
        required=True,
        action="append",
        metavar="DIR",
        help="directory of the task's files (one per --task, in the same order)",
    )
    p.add_argument("--output", required=True, metavar="DIR", help="fine-tuned model to write")
    p.add_argument("--step", type=int, help="checkpoint of --run (default: the newest)")
    add_settings(p, FinetuneSettings)
    p.add_argument(
        "--sweep",
        action="store_true",
        help="one run per learning rate of the recipe's grid (bert: 5e-5, 4e-5, 3e-5, 2e-5; "
        "small: 1e-3, 5e-4, 3e-4, 1e-4); keep the best on dev",
    )
    p.add_argument(
        "--random-init",
        action="store_true",
        help="only the architecture and tokenizer of --run, weights from --seed: the baseline",
    )
    p.add_argument(
        "--then-finetune",
        action="store_true",
        help="several tasks: fine-tune each task's model on its task alone afterwards (MT-DNN)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty --output")


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    inputs = {"run": [args.run], "data": args.data}
    if args.teacher:
        inputs["teacher"] = [args.teacher]
    check_apart({"output": args.output}, inputs)
    # Beside the output: a finished model directory is swapped in for it.
    with OutputLock(LOCAL, args.output, "finetune", beside=True):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    settings = FinetuneSettings(**settings_from(args, FinetuneSettings))
    specs = [load_task(t) for t in args.task]
    if len(specs) > 1:
        if args.sweep:
            raise UsageError("--sweep takes one --task; MT-DNN trains several with one setting")
        summary = run_multitask(
            Path(args.run),
            specs,
            [Path(d) for d in args.data],
            Path(args.output),
            settings,
            step=args.step,
            overwrite=args.overwrite,
            progress=progress_wanted(args),
            then_finetune=args.then_finetune,
            random_init=args.random_init,
        )
        final = summary.get("finetuned_dev") or summary["dev"]
        for name, scores in final.items():
            shown = {k: round(v, 2) for k, v in (scores or {}).items()}
            print(f"{name}: dev {json.dumps(shown)}")
        print(f"multi-task model of {len(specs)} tasks -> {args.output}/<task>/")
        return 0
    if args.then_finetune:
        raise UsageError("--then-finetune follows multi-task training: give several --task")
    if len(args.data) != 1:
        raise UsageError(f"one --task but {len(args.data)} --data")
    info = run_finetune(
        Path(args.run),
        specs[0],
        Path(args.data[0]),
        Path(args.output),
        settings,
        step=args.step,
        overwrite=args.overwrite,
        progress=progress_wanted(args),
        sweep=RECIPE_SWEEP if args.sweep else (),
        random_init=args.random_init,
    )
    for trial in info.get("sweep", []):
        print(f"lr {trial['learning_rate']:g}: dev {json.dumps(trial['dev'])}")
    final = info["epochs"][-1].get("dev") if info["epochs"] else None
    if final is not None:
        print(f"dev {json.dumps({k: round(v, 2) for k, v in final.items()})}")
    used = info["settings"]
    print(
        f"fine-tuned ({used['recipe']} recipe: lr {used['learning_rate']:g}, batch "
        f"{used['batch_size']}, {used['epochs']} epochs) on {info['examples']['train']} examples "
        f"({info['train_examples_per_second']:.1f}/s) -> {args.output}"
    )
    return 0
