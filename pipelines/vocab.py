"""`cloze vocab`: a document store -> a Hugging Face tokenizer directory.

Beam draws a deterministic sample of documents and writes it as text files; the Rust
trainer of `tokenizers` then streams those files, so memory does not grow with the corpus.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam

from corpus.vocab import VocabConfig, sample_score, save_tokenizer, train_tokenizer_from_files
from pipelines.counters import counter, read_counters
from pipelines.documents_io import ReadDocuments, read_store_stats
from pipelines.options import is_local, pipeline_options
from schemas.errors import UsageError


@dataclass
class VocabRunConfig:
    input: str
    output: str
    vocab: VocabConfig = field(default_factory=VocabConfig)
    sample_docs: int | None = None
    seed: int = 0


class _InSample(beam.DoFn):
    def __init__(self, seed: int, rate: float) -> None:
        self.seed = seed
        self.rate = rate

    def process(self, row: dict[str, Any]) -> Any:
        if sample_score(self.seed, row["id"]) < self.rate:
            counter("sample.documents").inc()
            counter("sample.chars").inc(len(row["text"]))
            yield row["text"]


class SampleText(beam.PTransform):
    """Document rows -> the texts of a deterministic `rate` share of them."""

    def __init__(self, seed: int, rate: float) -> None:
        super().__init__()
        self.seed = seed
        self.rate = rate

    def expand(self, rows: Any) -> Any:
        return rows | "DeterministicSample" >> beam.ParDo(_InSample(self.seed, self.rate))


def run_vocab(config: VocabRunConfig, beam_argv: Sequence[str] = ()) -> dict[str, Any]:
    options = pipeline_options(beam_argv)
    if not is_local(options):
        raise UsageError("cloze vocab trains on this machine; run it with the DirectRunner")
    upstream = read_store_stats(config.input)
    total = int(upstream.get("documents_out", 0)) or None
    rate = 1.0 if not config.sample_docs or not total else min(1.0, config.sample_docs / total)
    with tempfile.TemporaryDirectory(prefix="cloze-vocab-") as tmp:
        with beam.Pipeline(options=options) as p:
            texts = (
                p
                | "Read" >> ReadDocuments(config.input)
                | "Sample" >> SampleText(config.seed, rate)
            )
            _ = texts | "WriteSample" >> beam.io.WriteToText(os.path.join(tmp, "sample"))
        files = [os.path.join(tmp, f) for f in sorted(os.listdir(tmp)) if f.startswith("sample")]
        tok = train_tokenizer_from_files(files, config.vocab)
    save_tokenizer(tok, config.vocab, config.output)
    return {
        "kind": config.vocab.kind,
        "vocab_size": tok.get_vocab_size(),
        **read_counters(p.result),
    }
