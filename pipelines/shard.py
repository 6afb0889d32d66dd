"""`cloze shard`: a document store + a tokenizer -> WebDataset shards and `manifest.json`."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam
import numpy as np
from tokenizers import Tokenizer

from corpus import dealing
from corpus.instances import (
    Specials,
    chunk_tokens,
    content_capacity,
    pack_across_documents,
    pack_document,
    single_sequence,
)
from corpus.shardio import make_block, prepare_output_dir, write_blocks, write_manifest
from corpus.tokenize import document_sentences
from corpus.vocab import copy_tokenizer_dir, load_tokenizer
from pipelines.counters import counter, read_counters
from pipelines.documents_io import ReadDocuments
from pipelines.options import is_local, pipeline_options
from schemas.errors import BadInputError, UsageError
from schemas.manifest import TOKENIZER_DIR, Manifest, ShardInfo
from schemas.manifest import token_dtype_for as _dtype

PACKED_MODES = ("full-sentences", "doc-sentences")
# Tails of documents are packed together in this many groups (FULL-SENTENCES): enough to
# spread the work, few enough that most packed sequences come out full.
TAIL_GROUPS = 64


@dataclass
class ShardConfig:
    input: str
    tokenizer: str
    output: str
    mode: str = "full-sentences"
    max_seq_len: int = 128
    seed: int = 12345
    block_size: int = 512
    num_shards: int | None = None
    sequences_per_shard: int | None = 8192
    settings: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        """UsageError for settings no shard set can be built with."""
        # Positions are stored as int16 in pre-masked shards.
        if not 8 <= self.max_seq_len <= 32767:
            raise UsageError(f"--max-seq-len must be in 8..32767, got {self.max_seq_len}")
        if self.block_size < 1:
            raise UsageError(f"--block-size must be >= 1, got {self.block_size}")
        if self.num_shards is not None and self.num_shards < 1:
            raise UsageError(f"--num-shards must be >= 1, got {self.num_shards}")
        if self.sequences_per_shard is not None and self.sequences_per_shard < 1:
            raise UsageError(f"--sequences-per-shard must be >= 1, got {self.sequences_per_shard}")
        if self.mode not in PACKED_MODES:
            raise UsageError(
                f"--mode {self.mode} is not available yet; use one of {', '.join(PACKED_MODES)}"
            )


@dataclass(frozen=True)
class Instance:
    """One training sequence on its way to a shard."""

    key: int
    tokens: np.ndarray


class _Tokenize(beam.DoFn):
    """Document row -> (doc id, sentences as id arrays). Loads the tokenizer once per worker."""

    def __init__(self, tokenizer_json: str) -> None:
        self.tokenizer_json = tokenizer_json
        self.tok: Tokenizer | None = None
        self.docs = counter("shard.documents")
        self.tokens = counter("shard.document_tokens")

    def setup(self) -> None:
        self.tok = Tokenizer.from_str(self.tokenizer_json)

    def process(self, row: dict[str, Any]) -> Iterator[tuple[str, list[np.ndarray]]]:
        assert self.tok is not None
        sentences = document_sentences(self.tok, row["text"])
        self.docs.inc()
        self.tokens.inc(sum(len(s) for s in sentences))
        if sentences:
            yield row["id"], sentences


class _PackDocument(beam.DoFn):
    """(doc id, sentences) -> full Instances; the last, short chunk goes to `tails`."""

    TAILS = "tails"

    def __init__(self, mode: str, max_seq_len: int, seed: int, specials: Specials) -> None:
        self.mode = mode
        self.capacity = content_capacity(max_seq_len)
        self.seed = seed
        self.specials = specials

    def process(self, item: tuple[str, list[np.ndarray]]) -> Iterator[Any]:
        doc_id, sentences = item
        chunks = pack_document(sentences, self.capacity)
        for i, chunk in enumerate(chunks):
            last = i == len(chunks) - 1
            if last and self.mode == "full-sentences" and chunk_tokens(chunk) < self.capacity:
                group = dealing.sequence_key(self.seed, f"tail\x00{doc_id}") % TAIL_GROUPS
                yield beam.pvalue.TaggedOutput(self.TAILS, (group, (doc_id, chunk)))
                continue
            yield _instance(self.seed, f"{doc_id}\x00{i}", chunk, self.specials)


def _instance(
    seed: int, identity: str, chunk: Sequence[np.ndarray], specials: Specials
) -> Instance:
    counter("shard.sequences").inc()
    return Instance(dealing.sequence_key(seed, identity), single_sequence(chunk, specials))


class _PackTails(beam.DoFn):
    """(group, [(doc id, chunk)]) -> Instances that may cross documents (FULL-SENTENCES)."""

    def __init__(self, max_seq_len: int, seed: int, specials: Specials) -> None:
        self.capacity = content_capacity(max_seq_len)
        self.seed = seed
        self.specials = specials

    def process(
        self, item: tuple[int, Iterable[tuple[str, list[np.ndarray]]]]
    ) -> Iterator[Instance]:
        group, tails = item
        ordered = sorted(tails, key=lambda t: t[0])  # by doc id: the same packing on every run
        packed = pack_across_documents((t[1] for t in ordered), self.capacity, self.specials.sep)
        for i, chunk in enumerate(packed):
            yield _instance(self.seed, f"tails\x00{group}\x00{i}", chunk, self.specials)


class BuildInstances(beam.PTransform):
    """Document rows -> Instances for a packed mode."""

    def __init__(
        self, tokenizer_json: str, mode: str, max_seq_len: int, seed: int, specials: Specials
    ) -> None:
        super().__init__()
        self.tokenizer_json = tokenizer_json
        self.mode = mode
        self.max_seq_len = max_seq_len
        self.seed = seed
        self.specials = specials

    def expand(self, rows: Any) -> Any:
        # (doc id, sentences as id arrays)
        docs = rows | "Tokenize" >> beam.ParDo(_Tokenize(self.tokenizer_json))
        packed = docs | "PackDocuments" >> beam.ParDo(
            _PackDocument(self.mode, self.max_seq_len, self.seed, self.specials)
        ).with_outputs(_PackDocument.TAILS, main="full")
        if self.mode != "full-sentences":
            return packed.full
        crossing = (
            packed.tails
            | "GroupTails" >> beam.GroupByKey()
            | "PackTails" >> beam.ParDo(_PackTails(self.max_seq_len, self.seed, self.specials))
        )
        return (packed.full, crossing) | "AllInstances" >> beam.Flatten()


def _bucket(instance: Instance) -> int:
    return dealing.bucket_of(instance.key)


def _by_bucket(instance: Instance) -> tuple[int, Instance]:
    return dealing.bucket_of(instance.key), instance


class _Rank(beam.DoFn):
    """(bucket, instances) -> (shard, (position, instance)), using every bucket's count."""

    def __init__(self, num_shards: int | None, per_shard: int | None) -> None:
        self.num_shards = num_shards
        self.per_shard = per_shard

    def process(
        self, item: tuple[int, Iterable[Instance]], counts: dict[int, int]
    ) -> Iterator[tuple[int, tuple[int, Instance]]]:
        bucket, instances = item
        offsets = dealing.bucket_offsets(counts)
        shards = dealing.number_of_shards(sum(counts.values()), self.num_shards, self.per_shard)
        ordered = sorted(instances, key=lambda inst: (inst.key, inst.tokens.tobytes()))
        for i, inst in enumerate(ordered):
            shard, position = dealing.place(offsets[bucket] + i, shards)
            yield shard, (position, inst)


class DealToShards(beam.PTransform):
    """Instances -> (shard index, instances of that shard in order): a global shuffle."""

    def __init__(self, num_shards: int | None, per_shard: int | None) -> None:
        super().__init__()
        self.num_shards = num_shards
        self.per_shard = per_shard

    def expand(self, instances: Any) -> Any:
        # Sequences per bucket: a table of at most 2**bits numbers.
        counts = (
            instances
            | "BucketOf" >> beam.Map(_bucket)
            | "CountBuckets" >> beam.combiners.Count.PerElement()
        )
        return (
            instances
            | "KeyByBucket" >> beam.Map(_by_bucket)
            | "GroupBuckets" >> beam.GroupByKey()
            | "Rank"
            >> beam.ParDo(_Rank(self.num_shards, self.per_shard), beam.pvalue.AsDict(counts))
            | "GroupShards" >> beam.GroupByKey()
        )


class _WriteShard(beam.DoFn):
    def __init__(self, output: str, block_size: int, token_dtype: str) -> None:
        self.output = output
        self.block_size = block_size
        self.token_dtype = token_dtype

    def process(self, item: tuple[int, Iterable[tuple[int, Instance]]]) -> Iterator[str]:
        shard, placed = item
        ordered = [inst for _, inst in sorted(placed, key=lambda p: p[0])]
        blocks = [
            make_block([inst.tokens for inst in ordered[i : i + self.block_size]], self.token_dtype)
            for i in range(0, len(ordered), self.block_size)
        ]
        info = write_blocks(self.output, shard, self.token_dtype, blocks)
        counter("shard.files").inc()
        yield json.dumps(info.__dict__)


def run_shard(config: ShardConfig, beam_argv: Sequence[str] = ()) -> Manifest:
    """Build the shard set; returns the manifest written last into `config.output`."""
    config.validate()
    options = pipeline_options(beam_argv)
    if not is_local(options):
        raise UsageError(
            "cloze shard writes shards to a local directory; run it with the DirectRunner"
        )
    info = load_tokenizer(config.tokenizer)
    specials = Specials(cls=info.special_ids["cls"], sep=info.special_ids["sep"])
    token_dtype = _dtype(info.vocab_size)
    out = prepare_output_dir(config.output)
    tokenizer_json = info.tokenizer.to_str()
    with tempfile.TemporaryDirectory(prefix="cloze-shard-") as tmp:
        with beam.Pipeline(options=options) as p:
            rows = p | "Read" >> ReadDocuments(config.input)
            # Training sequences, [CLS] ... [SEP], not yet in any order.
            instances = rows | "BuildInstances" >> BuildInstances(
                tokenizer_json, config.mode, config.max_seq_len, config.seed, specials
            )
            # (shard, [(position, instance)]): shuffled across the whole corpus.
            dealt = instances | "Deal" >> DealToShards(
                config.num_shards, config.sequences_per_shard
            )
            _ = (
                dealt
                | "WriteShards" >> beam.ParDo(_WriteShard(str(out), config.block_size, token_dtype))
                | "RecordShards" >> beam.io.WriteToText(os.path.join(tmp, "infos"))
            )
        infos = sorted(_read_infos(tmp), key=lambda s: s.name)
    counters = read_counters(p.result)
    if not infos:
        raise BadInputError(f"{config.input}: no text to make sequences from")
    copy_tokenizer_dir(info, out / TOKENIZER_DIR)
    manifest = Manifest(
        mode=config.mode,  # type: ignore[arg-type]
        max_seq_len=config.max_seq_len,
        block_size=config.block_size,
        token_dtype=token_dtype,
        vocab_size=info.vocab_size,
        vocab_kind=info.kind,
        tokenizer_sha256=info.sha256,
        special_tokens=dict(info.special_ids),
        seed=config.seed,
        settings={
            "sequences_per_shard": config.sequences_per_shard,
            "num_shards": config.num_shards,
            **config.settings,
        },
        stats=counters,
        shards=tuple(infos),
        created_by=_created_by(),
    )
    write_manifest(out, manifest)
    return manifest


def _read_infos(directory: str) -> list[ShardInfo]:
    infos = []
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            infos.extend(ShardInfo(**json.loads(line)) for line in f if line.strip())
    return infos


def _created_by() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"clozeworks {version('clozeworks')}"
    except PackageNotFoundError:
        return "clozeworks"
