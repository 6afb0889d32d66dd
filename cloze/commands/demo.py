"""The whole chain on a corpus built from this Python's standard-library docstrings:
clean -> exact dedup -> WordPiece vocabulary -> full-sentences shards (length 128) ->
bert-tiny with dynamic MLM on the CPU -> inspect. Needs no network."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from clozeworks.commands import add_progress_flag, progress_wanted
from clozeworks.commands.inspect import render
from clozeworks.corpus.inspect.shards import shard_summary
from clozeworks.corpus.text.demo import write_demo_corpus
from clozeworks.corpus.vocab.train import VocabConfig
from clozeworks.pipelines.build import BuildConfig, run_build
from clozeworks.trainer.config import override, preset
from clozeworks.trainer.loop import train
from clozeworks.trainer.runinfo import run_summary

HELP = "run the whole chain on the built-in stdlib-docstring corpus"
BEAM = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", default="demo-out", metavar="DIR")
    p.add_argument("--steps", type=int, default=300, help="training steps")
    p.add_argument("--limit-docs", type=int, help="use only the first N docstrings")
    p.add_argument("--vocab-size", type=int, default=8000)
    add_progress_flag(p, "progress bars")


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    started = time.perf_counter()
    root = Path(args.output)
    raw = root / "raw" / "docstrings.jsonl.gz"
    count = write_demo_corpus(raw, limit=args.limit_docs)
    print(f"corpus: {count} stdlib docstrings -> {raw}")
    paths, _ = run_build(
        BuildConfig(
            inputs=[str(raw.parent)],
            root=str(root),
            # The docstrings carry stable ids (module:line:name). Without them ids would
            # contain the output path, and the sample and shuffle would depend on it.
            clean={"id_field": "id"},
            vocab=VocabConfig(kind="wordpiece", vocab_size=args.vocab_size),
            mode="full-sentences",
            max_seq_len=128,
            sequences_per_shard=2048,
        ),
        beam_argv,
        progress=progress_wanted(args),
    )
    # A few hundred CPU steps: a higher peak rate and short warm-up than the paper's
    # 1e-4 / 10k, which are tuned for a million steps.
    config = override(preset("bert-tiny"), "optim", lr=1e-3, warmup_steps=max(1, args.steps // 10))
    config = override(
        config,
        "",
        max_steps=args.steps,
        batch_size=32,
        save_every=max(1, args.steps // 2),
        log_every=max(1, min(25, args.steps // 4)),
    )
    run_dir = root / "run"
    # The demo rebuilds everything under its output, its own earlier run included.
    summary = train(
        config, Path(paths.shards), run_dir, progress=progress_wanted(args), overwrite=True
    )
    print()
    print(render(shard_summary(Path(paths.shards), verify=True)))
    print(render(run_summary(run_dir)))
    print()
    print(f"documents  {paths.docs}")
    print(f"tokenizer  {paths.tokenizer}")
    print(f"shards     {paths.shards}")
    print(f"run        {run_dir}")
    print(
        f"MLM loss: first {summary.first_mlm_loss:.3f}, last {summary.last_mlm_loss:.3f} "
        f"({summary.steps} steps); demo took {time.perf_counter() - started:.0f}s"
    )
    return 0
