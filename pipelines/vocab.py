"""`cloze vocab`: a document store -> a Hugging Face tokenizer directory.

Beam draws the deterministic training and held-out samples (`corpus.vocab.sample`) and
writes their texts as Parquet next to the output (`OUTPUT/.staging-<run>/`), on whatever
filesystem the output is on, so any runner works; for WordPiece it also counts characters.
This process then streams the sample back into the Rust trainer a few hundred documents at
a time, so memory does not grow with the sample, measures the result on the held-out
sample, and writes the directory (atomically when local; `tokenizer.json` last when not).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from clozeworks.corpus.outputs import check_apart
from clozeworks.corpus.vocab.alphabet import CharCounter, alphabet_report
from clozeworks.corpus.vocab.files import (
    DIRECTORY_FILES,
    TOKEN_COUNTS_FILE,
    TOKENIZER_FILE,
    VOCAB_STATS_FILE,
    replace_dir,
    write_tokenizer_dir,
)
from clozeworks.corpus.vocab.morphemes import mark
from clozeworks.corpus.vocab.sample import SampleRates, SampleSettings
from clozeworks.corpus.vocab.stats import HeldOutStats, heldout_stats
from clozeworks.corpus.vocab.train import VocabConfig, train_tokenizer, untrained_tokenizer
from clozeworks.pipelines.plumbing.beamfs import BEAM_FS, FileSystemsDoFn
from clozeworks.pipelines.plumbing.counters import counter
from clozeworks.pipelines.plumbing.progress import Bar
from clozeworks.pipelines.plumbing.stage import StageRun
from clozeworks.pipelines.read_store import (
    DOCUMENTS_READ,
    ReadDocumentTables,
    read_store_stats,
    store_totals,
)
from clozeworks.schemas.errors import BadInputError
from clozeworks.schemas.special_tokens import special_tokens_for
from clozeworks.schemas.stats import SampleFigures, VocabStats
from clozeworks.schemas.validate import loads

HELDOUT = "heldout"
SAMPLE_PREFIX = "sample"
HELDOUT_PREFIX = "heldout"
CHARS_FILE = "chars.json"
TEXTS = pa.schema([("text", pa.string())])


@dataclass(frozen=True, kw_only=True)
class VocabRunConfig(SampleSettings):
    """The sample settings, the vocabulary's, and where: a document store and the
    tokenizer directory to write."""

    input: str
    output: str
    vocab: VocabConfig = field(default_factory=VocabConfig)
    # Deprecated: pass `progress=True` to run_vocab, as to the other drivers (still read).
    show_progress: bool = False


class _SplitBatch(beam.DoFn):
    def __init__(self, rates: SampleRates) -> None:
        self.rates = rates

    def process(self, table: Any) -> Iterator[Any]:
        train, heldout = self.rates.masks(table.column("id").to_pylist())
        counter("documents_read").inc(table.num_rows)
        for mask, name in ((train, "sample"), (heldout, HELDOUT)):
            if not mask.any():
                continue
            texts = table.filter(mask).select(["text"]).cast(TEXTS)
            counter(f"{name}.documents").inc(texts.num_rows)
            counter(f"{name}.bytes").inc(pc.sum(pc.binary_length(texts["text"])).as_py() or 0)
            yield texts if name == "sample" else beam.pvalue.TaggedOutput(HELDOUT, texts)


class SampleForVocab(beam.PTransform):
    """Tables of (id, text) -> tables of the texts in the training sample (main output) and
    in the held-out sample (tagged `heldout`). Documents stay whole: the trainer must see
    their line breaks as the shard builder will (byte-level BPE learns merges with them)."""

    def __init__(self, rates: SampleRates) -> None:
        super().__init__()
        self.rates = rates

    def expand(self, tables: Any) -> Any:
        return tables | "SplitBySeed" >> beam.ParDo(_SplitBatch(self.rates)).with_outputs(
            HELDOUT, main="sample"
        )


class MarkMorphemes(beam.PTransform):
    """Tables of texts -> the same with MARK at each morpheme boundary inside a word
    (`corpus.vocab.morphemes`): the analyzer runs on the workers, once per sample text."""

    def __init__(self, analyzer: str) -> None:
        super().__init__()
        self.analyzer = analyzer

    def expand(self, tables: Any) -> Any:
        return tables | "Mark" >> beam.Map(mark_table, self.analyzer)


def mark_table(table: Any, analyzer: str) -> Any:
    texts = [mark(text, analyzer) for text in table.column("text").to_pylist()]
    return pa.table({"text": pa.array(texts, pa.string())}, schema=TEXTS)


class _CharCountsFn(beam.CombineFn):
    def create_accumulator(self) -> CharCounter:
        return CharCounter()

    def add_input(self, acc: CharCounter, table: Any) -> CharCounter:
        acc.add("".join(table.column("text").to_pylist()))
        return acc

    def merge_accumulators(self, accs: Any) -> CharCounter:
        merged = CharCounter()
        for acc in accs:
            merged.merge(acc)
        return merged

    def compact(self, acc: CharCounter) -> CharCounter:
        acc.flush()
        return acc

    def extract_output(self, acc: CharCounter) -> dict[str, int]:
        return acc.result()


class CountChars(beam.PTransform):
    """Tables with a `text` column -> one dict: how often each character occurs in them."""

    def expand(self, tables: Any) -> Any:
        return tables | "SumCharCounts" >> beam.CombineGlobally(_CharCountsFn())


class _WriteJson(FileSystemsDoFn):
    """Writes its one element as a JSON file (rewriting it on a retry is harmless)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def process(self, data: Any) -> Iterator[str]:
        with BEAM_FS.create(self.path) as f:
            f.write(json.dumps(data, ensure_ascii=False, sort_keys=True).encode("utf-8"))
        yield self.path


def _is_local(path: str) -> bool:
    return FileSystems.get_scheme(path) is None


def _documents(pattern: str) -> Iterator[str]:
    """The texts of every Parquet file matching `pattern`, read through Beam's filesystems
    one row group (one batch of the store) at a time and handed on a few hundred at a time
    (`tokenizers` buffers 256 items ahead of its workers). Not `iter_batches`: it kept
    several row groups alive (+620 MB against +140 MB streaming a 550 MB sample)."""
    for path in BEAM_FS.match(pattern):
        with BEAM_FS.open(path) as f:
            parquet = pq.ParquetFile(f)
            for group in range(parquet.num_row_groups):
                texts = parquet.read_row_group(group, columns=["text"]).column(0)
                for start in range(0, len(texts), 256):
                    yield from texts.slice(start, 256).to_pylist()


class _Documents:
    """The sample's texts, read again each time they are iterated (a morpheme WordPiece
    vocabulary may be trained twice to reach its size)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    def __iter__(self) -> Iterator[str]:
        return _documents(self.pattern)


def _batches(texts: Iterator[str], size: int = 256) -> Iterator[list[str]]:
    batch: list[str] = []
    for text in texts:
        batch.append(text)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def run_vocab(
    config: VocabRunConfig, beam_argv: Sequence[str] = (), progress: bool = False
) -> dict[str, Any]:
    """Sample, train, measure, write. Returns what `vocab_stats.json` holds, and under
    "seconds" how long each step took (not saved: it would make reruns differ). With
    `progress`, bars on stderr while it runs on this machine."""
    progress = progress or config.show_progress
    check_apart({"output": config.output}, {"input": [config.input]})
    seconds: dict[str, float] = {}
    clock = time.perf_counter()
    with StageRun(beam_argv, progress, "vocab") as run:
        # the workers write the sample to the output
        run.require_reach([config.input], {"output": config.output})
        documents, text_bytes = store_totals(config.input)
        if documents == 0:
            raise BadInputError(f"{config.input}: the document store holds no documents")
        rates = config.rates(documents, text_bytes)
        # On a bucket a directory is objects under a prefix: `exists` would say no to an
        # earlier tokenizer there, and a failed run would remove it.
        existed = BEAM_FS.is_directory(config.output)
        staging = run.stage(config.output)
        try:
            counters = _draw_samples(run, config, rates, staging)
            seconds["sample"], clock = _lap(clock)
            if not counters.get("sample.documents"):
                raise BadInputError(
                    f"{config.input}: the sample is empty: of {documents} documents, "
                    "--sample-docs / --sample-bytes select none (raise them)"
                )
            chars = None
            if config.vocab.kind == "wordpiece":
                with BEAM_FS.open(BEAM_FS.join(staging, CHARS_FILE)) as f:
                    chars = loads(f.read().decode("utf-8"))
            tok = train_tokenizer(
                _Documents(BEAM_FS.join(staging, f"{SAMPLE_PREFIX}*")),
                config.vocab,
                chars,
                show_progress=progress,
                marked=True,
            )
            seconds["train"], clock = _lap(clock)
            heldout = _measure(tok, config.vocab, BEAM_FS.join(staging, f"{HELDOUT_PREFIX}*"))
            measured = heldout.summary()
            seconds["measure"], clock = _lap(clock)
        except BaseException:
            if not existed:  # leave behind no empty output directory of ours
                BEAM_FS.remove_tree(config.output)
            raise
        BEAM_FS.remove_tree(staging)
        stats = VocabStats(
            kind=config.vocab.kind,
            vocab_size=tok.get_vocab_size(with_added_tokens=True),
            lowercase=config.vocab.lowercase,
            input=config.input,
            sample=SampleFigures(
                seed=config.seed,
                rate=rates.train,
                documents=counters.get("sample.documents", 0),
                bytes=counters.get("sample.bytes", 0),
                sample_docs=config.sample_docs,
                sample_bytes=config.sample_bytes,
                store_documents=documents,
            ),
            heldout={"rate": rates.heldout, **measured},
            pre_tokenize=_pre_tokenize(config.vocab),
            hangul=config.vocab.hangul,
            alphabet=None
            if chars is None
            else alphabet_report(
                chars, untrained_tokenizer(config.vocab), config.vocab.limit_alphabet
            ),
        ).to_json()
        run.check_locks()
        _write_output(tok, config.vocab, stats, heldout.token_counts(), config.output)
        seconds["write"], clock = _lap(clock)
    return {**stats, "seconds": seconds}


def _pre_tokenize(vocab: VocabConfig) -> str:
    return "morphemes:" + vocab.analyzer if vocab.pre_tokenize == "morphemes" else "words"


def _lap(since: float) -> tuple[float, float]:
    now = time.perf_counter()
    return round(now - since, 3), now


def _draw_samples(
    run: StageRun, config: VocabRunConfig, rates: SampleRates, staging: str
) -> dict[str, int]:
    """Run the Beam pipeline that writes the samples (and character counts) to `staging`."""
    documents = read_store_stats(config.input).documents_out or None
    bars = [Bar(DOCUMENTS_READ, "sample", documents)]
    with run.progress(bars), run.pipeline() as p:
        _ = p | "Sample" >> DrawSamples(config, rates, staging)
    return run.counters


class DrawSamples(beam.PTransform):
    """The vocab stage's pipeline: a document store -> the training and held-out samples as
    Parquet files in `staging` (and for WordPiece the training sample's character counts)."""

    def __init__(self, config: VocabRunConfig, rates: SampleRates, staging: str) -> None:
        super().__init__()
        self.config, self.rates, self.staging = config, rates, staging

    def expand(self, pbegin: Any) -> None:
        staging = self.staging
        tables = pbegin | "Read" >> ReadDocumentTables(self.config.input, ["id", "text"])
        # Training-sample chunks (main) and held-out chunks (tagged).
        parts = tables | "Split" >> SampleForVocab(self.rates)
        sample = parts.sample
        if self.config.vocab.pre_tokenize == "morphemes":
            sample = sample | "MarkMorphemes" >> MarkMorphemes(self.config.vocab.analyzer)
        _ = sample | "WriteSample" >> beam.io.WriteToParquetBatched(
            BEAM_FS.join(staging, SAMPLE_PREFIX), schema=TEXTS, file_name_suffix=".parquet"
        )
        _ = parts[HELDOUT] | "WriteHeldOut" >> beam.io.WriteToParquetBatched(
            BEAM_FS.join(staging, HELDOUT_PREFIX), schema=TEXTS, file_name_suffix=".parquet"
        )
        if self.config.vocab.kind == "wordpiece":
            # {character: count} over the training sample: the WordPiece alphabet's source.
            counts = sample | "CountChars" >> CountChars()
            write = _WriteJson(BEAM_FS.join(staging, CHARS_FILE))
            _ = counts | "WriteChars" >> beam.ParDo(write)


def _measure(tok: Any, vocab: VocabConfig, heldout_pattern: str) -> HeldOutStats:
    sp = special_tokens_for(vocab.kind)
    special_ids = [tok.token_to_id(t) for t in vocab.special_tokens]
    return heldout_stats(
        tok,
        _batches(_documents(heldout_pattern)),
        tok.token_to_id(sp.unk),
        [i for i in special_ids if i is not None],
    )


def _write_output(
    tok: Any, vocab: VocabConfig, stats: dict[str, Any], counts: dict[str, Any], output: str
) -> None:
    def build(directory: Path) -> None:
        extra = (*vocab.extra_special_tokens, *vocab.sentinel_tokens)
        write_tokenizer_dir(tok, directory, vocab.kind, extra)
        text = json.dumps(stats, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        (directory / VOCAB_STATS_FILE).write_text(text, encoding="utf-8")
        (directory / TOKEN_COUNTS_FILE).write_text(json.dumps(counts) + "\n", encoding="utf-8")

    if _is_local(output):
        replace_dir(build, output)
        return
    with tempfile.TemporaryDirectory(prefix="cloze-vocab-") as tmp:
        build(Path(tmp))
        _upload(Path(tmp), output)


def _upload(local: Path, output: str) -> None:
    """Copy a finished directory to a non-local `output`: the old tokenizer.json goes first
    and the new one comes last, so readers never take a mix for a tokenizer."""
    for name in (TOKENIZER_FILE, *DIRECTORY_FILES[1:]):
        if BEAM_FS.exists(BEAM_FS.join(output, name)):
            BEAM_FS.delete([BEAM_FS.join(output, name)])
    names = sorted(p.name for p in local.iterdir() if p.name != TOKENIZER_FILE)
    for name in [*names, TOKENIZER_FILE]:
        with BEAM_FS.create(BEAM_FS.join(output, name)) as f:
            f.write((local / name).read_bytes())
