"""Export a training run as a directory Hugging Face `transformers` loads, with the tokenizer.

BERT -> BertForPreTraining (BertForMaskedLM without an NSP/SOP head), RoBERTa ->
RobertaForMaskedLM, pre-LN BERT/RoBERTa -> RobertaPreLayerNormForMaskedLM, ALBERT ->
AlbertForPreTraining (AlbertForMaskedLM without a sentence head), ELECTRA ->
ElectraForPreTraining plus the generator as ElectraForMaskedLM in OUTPUT/generator.
A fine-tuned model (`cloze finetune`'s output) -> its family's ...ForSequenceClassification
or ...ForTokenClassification.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from clozeworks.schemas.errors import UsageError
from clozeworks.trainer.export import export_run
from clozeworks.trainer.finetune.export import export_finetuned
from clozeworks.trainer.finetune.store import FINETUNE_FILE

HELP = "run -> transformers model directory (+ tokenizer)"
BEAM = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--run", required=True, metavar="DIR", help="training run or fine-tuned model directory"
    )
    p.add_argument("--output", required=True, metavar="DIR", help="directory to write")
    p.add_argument("--step", type=int, help="checkpoint step (default: the newest committed)")


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    if (Path(args.run) / FINETUNE_FILE).is_file():
        if args.step is not None:
            raise UsageError("--step applies to training runs; a fine-tuned model has one")
        print(f"wrote {export_finetuned(Path(args.run), Path(args.output))}")
        return 0
    for path in export_run(Path(args.run), Path(args.output), args.step):
        print(f"wrote {path}")
    return 0
