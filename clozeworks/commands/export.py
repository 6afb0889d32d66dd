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
import sys
import tempfile
from pathlib import Path

from clozeworks.commands.fetched import fetched
from clozeworks.corpus.locks import OutputLock
from clozeworks.corpus.outputs import LOCAL, check_apart
from clozeworks.corpus.shards.cache import is_remote
from clozeworks.schemas.errors import SettingError, UsageError
from clozeworks.trainer.export import export_run
from clozeworks.trainer.finetune.export import export_finetuned
from clozeworks.trainer.finetune.store import FINETUNE_FILE
from clozeworks.trainer.publish import publish

HELP = "run -> transformers model directory (+ tokenizer)"
BEAM = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--run",
        required=True,
        metavar="DIR",
        help="training run or fine-tuned model directory, or its URL (gs://, s3://)",
    )
    p.add_argument(
        "--output",
        required=True,
        metavar="DIR",
        help="directory to write, or an object-store prefix (gs://, s3://) that holds nothing yet",
    )
    p.add_argument("--step", type=int, help="checkpoint step (default: the newest committed)")


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    if not sys.stderr.isatty():
        # transformers draws a bar per file it writes: noise in a log nobody watches live.
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    if args.step is not None and args.step < 0:
        raise SettingError("step", f"must be >= 0, got {args.step}")
    check_apart({"output": args.output}, {"run": [args.run]})
    if not is_remote(args.output):
        # Beside the output: the export swaps a finished directory in for it.
        with OutputLock(LOCAL, args.output, "export", beside=True):
            written = _export(args, Path(args.output))
        for path in written:
            print(f"wrote {path}")
        return 0
    # Written whole on local disk first, then uploaded with each config.json last.
    with tempfile.TemporaryDirectory(prefix="cloze-export-") as tmp:
        local = Path(tmp) / "model"
        written = [p.relative_to(local).as_posix() for p in _export(args, local)]
        publish(local, args.output)
    for sub in written:
        print(f"wrote {args.output.rstrip('/')}{'/' + sub if sub != '.' else ''}")
    return 0


def _export(args: argparse.Namespace, output: Path) -> list[Path]:
    # A run on a bucket: its files and the one step exported, fetched to this machine.
    run = fetched(args.run, args.step) if is_remote(args.run) else Path(args.run)
    if (run / FINETUNE_FILE).is_file():
        if args.step is not None:
            raise UsageError("--step applies to training runs; a fine-tuned model has one")
        return [export_finetuned(run, output)]
    return export_run(run, output, args.step)
