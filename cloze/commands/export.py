"""Export a training run as a directory Hugging Face `transformers` loads, with the tokenizer.

BERT -> BertForPreTraining (BertForMaskedLM without an NSP/SOP head), RoBERTa ->
RobertaForMaskedLM, pre-LN BERT/RoBERTa -> RobertaPreLayerNormForMaskedLM, ALBERT ->
AlbertForPreTraining (AlbertForMaskedLM without a sentence head), ELECTRA ->
ElectraForPreTraining plus the generator as ElectraForMaskedLM in OUTPUT/generator.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from clozeworks.trainer.export import export_run

HELP = "run -> transformers model directory (+ tokenizer)"
BEAM = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", required=True, metavar="DIR", help="training run directory")
    p.add_argument("--output", required=True, metavar="DIR", help="directory to write")
    p.add_argument("--step", type=int, help="checkpoint step (default: the newest committed)")


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    for path in export_run(Path(args.run), Path(args.output), args.step):
        print(f"wrote {path}")
    return 0
