"""`cloze shard`: a document store + a tokenizer -> WebDataset shards and `manifest.json`.

Read -> BuildInstances (pipelines/sequences.py) -> DealToShards (a global shuffle
that leaves shard sizes within one sequence of each other) -> WriteShards (blocks, and for
`--premask` the static masks, written under temporary names and renamed) -> the driver
copies the tokenizer and writes the manifest last. Output goes through Beam's
FileSystems, so `--output` may be local or gs://, s3://, ...
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apache_beam as beam
import numpy as np
from apache_beam.coders import VarIntCoder

from clozeworks.corpus.shards import dealing
from clozeworks.corpus.shards.blocks import (
    make_block,
    prepare_output_dir,
    write_blocks,
    write_manifest,
)
from clozeworks.corpus.shards.instances import PACKING_RULES, SequenceBatch, Specials
from clozeworks.corpus.shards.pairs import PAIR_RULES, SHORT_SEQ_PROB
from clozeworks.corpus.text.sentences import DEFAULT_LANGUAGE
from clozeworks.corpus.vocab.files import TOKEN_COUNTS_FILE, read_token_counts
from clozeworks.corpus.vocab.train import TokenizerInfo, load_tokenizer
from clozeworks.pipelines.beamfs import BEAM_FS
from clozeworks.pipelines.coders import ArraysCoder
from clozeworks.pipelines.counters import counter, read_counters
from clozeworks.pipelines.documents_io import (
    DOCUMENTS_READ,
    ReadDocumentTables,
    read_store_stats,
    store_totals,
)
from clozeworks.pipelines.options import is_local, pipeline_options, shuffle_for
from clozeworks.pipelines.progress import Bar, Tally, pipeline_progress
from clozeworks.pipelines.runner import run_pipeline
from clozeworks.pipelines.sequences import BuildInstances, InstanceSettings
from clozeworks.pipelines.shuffle import Shuffle
from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.schemas.kinds import MASK_KINDS, PACKED_MODES, PAIR_MODES, SHARD_MODES
from clozeworks.schemas.manifest import TOKENIZER_DIR, Manifest, ShardInfo
from clozeworks.schemas.manifest import token_dtype_for as _dtype
from clozeworks.schemas.masking import MaskingSettings

if TYPE_CHECKING:
    from clozeworks.corpus.shards.premask import StaticMasker

__all__ = ["PACKED_MODES", "PAIR_MODES", "DealToShards", "ShardConfig", "run_shard"]


# Progress count (pipelines.progress) of sequences written to shards.
SEQUENCES_WRITTEN = "sequences_written"


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
    short_seq_prob: float = SHORT_SEQ_PROB
    pair_rules: str = "clozeworks"
    packing_rules: str = "clozeworks"
    language: str = DEFAULT_LANGUAGE
    premask: str | None = None
    dupe_factor: int = 1
    max_predictions: int | None = None  # None: corpus.shards.premask.default_max_predictions
    mask_prob: float = 0.15
    settings: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        """UsageError for settings no shard set can be built with."""
        if self.mode not in SHARD_MODES:
            raise UsageError(f"--mode must be one of {', '.join(SHARD_MODES)}, got {self.mode}")
        # Positions are stored as int16 in pre-masked shards.
        if not 8 <= self.max_seq_len <= 32767:
            raise UsageError(f"--max-seq-len must be in 8..32767, got {self.max_seq_len}")
        if self.block_size < 1:
            raise UsageError(f"--block-size must be >= 1, got {self.block_size}")
        if self.num_shards is not None and self.num_shards < 1:
            raise UsageError(f"--num-shards must be >= 1, got {self.num_shards}")
        if self.sequences_per_shard is not None and self.sequences_per_shard < 1:
            raise UsageError(f"--sequences-per-shard must be >= 1, got {self.sequences_per_shard}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise UsageError(f"--short-seq-prob must be in [0, 1], got {self.short_seq_prob}")
        if self.pair_rules not in PAIR_RULES:
            raise UsageError(f"--pair-rules must be one of {', '.join(PAIR_RULES)}")
        if self.packing_rules not in PACKING_RULES:
            raise UsageError(f"--packing-rules must be one of {', '.join(PACKING_RULES)}")
        if self.dupe_factor < 1:
            raise UsageError(f"--dupe-factor must be >= 1, got {self.dupe_factor}")
        if self.premask is None and self.dupe_factor != 1:
            raise UsageError(
                "--dupe-factor needs --premask: without it the trainer masks every epoch anew"
            )
        if self.premask is not None and self.premask not in MASK_KINDS:
            raise UsageError(f"--premask must be one of {', '.join(MASK_KINDS)}")
        if self.max_predictions is not None and self.max_predictions < 1:
            raise UsageError(f"--max-predictions must be >= 1, got {self.max_predictions}")
        self.masking()

    def masking(self) -> MaskingSettings | None:
        if self.premask is None:
            return None
        # corpus.shards.premask imports torch (a second of imports, and an extra to install):
        # only when masking statically.
        try:
            from clozeworks.corpus.shards.premask import default_max_predictions
        except ModuleNotFoundError as err:
            if err.name != "torch":
                raise
            raise UsageError(
                "--premask draws masks with PyTorch, which is not installed: "
                "pip install 'clozeworks[premask]'"
            ) from None

        max_predictions = self.max_predictions or default_max_predictions(self.max_seq_len)
        try:
            return MaskingSettings(
                kind=self.premask,  # type: ignore[arg-type]
                prob=self.mask_prob,
                max_predictions=max_predictions,
            )
        except ValueError as err:
            raise UsageError(str(err)) from None

    def build_settings(self) -> dict[str, Any]:
        """Everything besides the manifest's own fields that decides the shards' bytes."""
        return {
            "sequences_per_shard": self.sequences_per_shard,
            "num_shards": self.num_shards,
            "short_seq_prob": self.short_seq_prob if self.mode in PAIR_MODES else None,
            "pair_rules": self.pair_rules if self.mode in PAIR_MODES else None,
            "packing_rules": (
                self.packing_rules if self.mode in ("full-sentences", "doc-sentences") else None
            ),
            "sentence_splitter": "sentencex" if self.mode != "single" else None,
            "language": self.language,
            **self.settings,
        }


def _bucket_size(item: tuple[int, SequenceBatch]) -> tuple[int, int]:
    return item[0], len(item[1])


class _Rank(beam.DoFn):
    """(bucket, [SequenceBatch]) -> (shard, (positions, SequenceBatch)), one element per
    shard the bucket's sequences go to, using every bucket's count."""

    def __init__(self, num_shards: int | None, per_shard: int | None) -> None:
        self.num_shards = num_shards
        self.per_shard = per_shard
        self._offsets: dict[int, int] | None = None

    def process(
        self, item: tuple[int, Iterable[SequenceBatch]], counts: dict[int, int]
    ) -> Iterator[tuple[int, tuple[np.ndarray, SequenceBatch]]]:
        if self._offsets is None or len(self._offsets) != len(counts):
            self._offsets = dealing.bucket_offsets(counts)
        bucket, batches = item
        batch = SequenceBatch.concat(list(batches))
        shards = dealing.number_of_shards(sum(counts.values()), self.num_shards, self.per_shard)
        order = dealing.key_order(batch.keys, functools.partial(_tiebreak, batch))
        ranks = self._offsets[bucket] + np.arange(len(order), dtype=np.int64)
        shard_of, position = ranks % shards, ranks // shards
        by_shard = np.argsort(shard_of, kind="stable")
        edges = np.flatnonzero(np.diff(shard_of[by_shard])) + 1
        for part in np.split(by_shard, edges):
            yield int(shard_of[part[0]]), (position[part], batch.take(order[part]))


def _placed_to_arrays(placed: tuple[np.ndarray, SequenceBatch]) -> list[np.ndarray]:
    return [placed[0], *placed[1].to_arrays()]


def _placed_from_arrays(parts: Sequence[np.ndarray]) -> tuple[np.ndarray, SequenceBatch]:
    return parts[0], SequenceBatch.from_arrays(parts[1:])


BATCH_CODER = ArraysCoder(SequenceBatch.to_arrays, SequenceBatch.from_arrays)
# (positions in the shard, the sequences placed there)
PLACED_CODER = ArraysCoder(_placed_to_arrays, _placed_from_arrays)


def _tiebreak(batch: SequenceBatch) -> list[bytes]:
    pairs = zip(batch.sequences(), batch.copies.tolist(), strict=True)
    return [s.tobytes() + c.to_bytes(2, "big") for s, c in pairs]


class DealToShards(beam.PTransform):
    """(bucket, SequenceBatch) -> (shard, [(positions, SequenceBatch)]): a global shuffle.

    A sequence's rank is its place in the order of all keys; rank r goes to shard r mod S
    at position r div S, so shards differ by at most one sequence and each is an i.i.d.
    sample of the corpus. Takes one PCollection or a tuple of them.
    """

    def __init__(
        self, num_shards: int | None, per_shard: int | None, shuffle: Shuffle | None = None
    ) -> None:
        super().__init__()
        self.num_shards = num_shards
        self.per_shard = per_shard
        self.shuffle = shuffle or Shuffle()

    def expand(self, batches: Any) -> Any:
        parts = tuple(batches) if isinstance(batches, tuple | list) else (batches,)
        # Sequences per bucket: a table of at most 4096 numbers.
        sizes = [p | f"BucketSizes{i}" >> beam.Map(_bucket_size) for i, p in enumerate(parts)]
        counts = sizes | "AllSizes" >> beam.Flatten() | "CountBuckets" >> beam.CombinePerKey(sum)
        return (
            parts
            | "GroupBuckets" >> self.shuffle.group_by_key("buckets", VarIntCoder(), BATCH_CODER)
            | "Rank"
            >> beam.ParDo(_Rank(self.num_shards, self.per_shard), beam.pvalue.AsDict(counts))
            | "GroupShards" >> self.shuffle.group_by_key("shards", VarIntCoder(), PLACED_CODER)
        )


@dataclass(frozen=True)
class MaskSpec:
    """What a worker needs to mask statically (tables are built once per worker)."""

    settings: MaskingSettings
    seed: int
    vocab_size: int
    special_ids: tuple[int, ...]
    word_start: tuple[bool, ...]
    mask_id: int
    pad_id: int
    counts: tuple[int, ...] | None = None  # token_counts.json, for replacements by frequency

    def masker(self) -> StaticMasker:
        from clozeworks.corpus.shards.masking import MaskTables
        from clozeworks.corpus.shards.premask import StaticMasker

        counts = None if self.counts is None else list(self.counts)
        tables = MaskTables.build(
            self.vocab_size, list(self.special_ids), list(self.word_start), self.mask_id, counts
        )
        return StaticMasker(tables, self.settings, self.seed, self.pad_id)


class _WriteShard(beam.DoFn):
    """(shard, [(positions, SequenceBatch)]) -> the shard's manifest entry as JSON."""

    def __init__(
        self, output: str, block_size: int, token_dtype: str, pairs: bool, mask: MaskSpec | None
    ) -> None:
        self.output = output
        self.block_size = block_size
        self.token_dtype = token_dtype
        self.pairs = pairs
        self.mask = mask
        self.masker: StaticMasker | None = None

    def setup(self) -> None:
        self.masker = self.mask.masker() if self.mask is not None else None
        self.tally = Tally()

    def finish_bundle(self) -> None:
        self.tally.save()

    def _blocks(self, batch: SequenceBatch) -> Iterator[Any]:
        for lo in range(0, len(batch), self.block_size):
            part = batch.take(np.arange(lo, min(lo + self.block_size, len(batch))))
            sequences = part.sequences()
            predictions = None
            if self.masker is not None:
                masked = self.masker.mask(sequences, part.keys.tolist(), part.copies.tolist())
                sequences = [m.tokens for m in masked]
                predictions = [(m.positions, m.labels) for m in masked]
                counter("premask.predictions").inc(sum(len(m.positions) for m in masked))
            yield make_block(
                sequences,
                self.token_dtype,
                segments=part.segments if self.pairs else None,
                labels=part.labels if self.pairs else None,
                predictions=predictions,
            )

    def process(
        self, item: tuple[int, Iterable[tuple[np.ndarray, SequenceBatch]]]
    ) -> Iterator[str]:
        shard, placed = item
        parts = list(placed)
        positions = np.concatenate([p for p, _ in parts])
        batch = SequenceBatch.concat([b for _, b in parts]).take(np.argsort(positions))
        info = write_blocks(self.output, shard, self.token_dtype, self._blocks(batch), BEAM_FS)
        counter("shard.files").inc()
        self.tally.add(SEQUENCES_WRITTEN, len(batch))
        yield json.dumps(info.__dict__)


def _mask_spec(config: ShardConfig, info: TokenizerInfo) -> MaskSpec | None:
    settings = config.masking()
    if settings is None:
        return None
    counts = read_token_counts(info.path, info.vocab_size)
    if settings.draws_by_frequency and counts is None:
        print(
            f"premask: {info.path} has no {TOKEN_COUNTS_FILE} (cloze vocab writes one); "
            "random replacements are drawn uniformly, not by corpus frequency",
            file=sys.stderr,
        )
    return MaskSpec(
        settings=settings,
        seed=config.seed,
        vocab_size=info.vocab_size,
        special_ids=tuple(info.all_special_ids),
        word_start=tuple(info.word_start_table()),
        mask_id=info.special_ids["mask"],
        pad_id=info.special_ids["pad"],
        counts=None if counts is None else tuple(counts),
    )


def run_shard(
    config: ShardConfig, beam_argv: Sequence[str] = (), progress: bool = False
) -> Manifest:
    """Build the shard set; returns the manifest written last into `config.output`. With
    `progress`, bars on stderr while it runs on this machine."""
    config.validate()
    options = pipeline_options(beam_argv)
    info = load_tokenizer(config.tokenizer)
    specials = Specials(cls=info.special_ids["cls"], sep=info.special_ids["sep"])
    token_dtype = _dtype(info.vocab_size)
    store = read_store_stats(config.input)
    # Stores written before dedup counted bytes have no bytes_out: estimate from footers.
    text_bytes = int(store.get("bytes_out") or store_totals(config.input)[1])
    settings = InstanceSettings(
        mode=config.mode,
        max_seq_len=config.max_seq_len,
        seed=config.seed,
        specials=specials,
        token_dtype=token_dtype,
        dupe_factor=config.dupe_factor,
        short_seq_prob=config.short_seq_prob,
        pair_rules=config.pair_rules,
        packing_rules=config.packing_rules,
        language=config.language,
        # Sized from the store's text; neither changes which shards come out.
        bucket_bits=dealing.bucket_bits_for(text_bytes * config.dupe_factor),
        documents=int(store.get("documents_out", 0)),
    )
    out = prepare_output_dir(config.output, BEAM_FS)
    staging = BEAM_FS.new_staging_dir(out)
    # Buckets sized by the text: its token ids take fewer bytes than it does.
    shuffled = text_bytes * config.dupe_factor
    shuffle = shuffle_for(options, BEAM_FS.join(staging, "shuffle"), shuffled)
    write = _WriteShard(
        out, config.block_size, token_dtype, config.mode in PAIR_MODES, _mask_spec(config, info)
    )
    bars = [
        Bar(DOCUMENTS_READ, "read", settings.documents or None),
        Bar(SEQUENCES_WRITTEN, "sequences", unit="seqs"),
    ]
    try:
        with (
            pipeline_progress(bars, progress and is_local(options)),
            run_pipeline(options) as p,
        ):
            # pyarrow Tables: whole row groups of the store, never one dict per document.
            tables = p | "Read" >> ReadDocumentTables(config.input, ["id", "text"])
            # (bucket, SequenceBatch): training sequences, [CLS] ... [SEP], in no order yet.
            batches = tables | "BuildInstances" >> BuildInstances(
                info.tokenizer.to_str(), settings, config.input, shuffle
            )
            # (shard, [(positions, SequenceBatch)]): shuffled across the whole corpus.
            dealt = batches | "Deal" >> DealToShards(
                config.num_shards, config.sequences_per_shard, shuffle
            )
            _ = (
                dealt
                | "WriteShards" >> beam.ParDo(write)
                | "RecordShards" >> beam.io.WriteToText(BEAM_FS.join(staging, "infos"))
            )
        infos = sorted(_read_infos(staging), key=lambda s: s.name)
    finally:
        BEAM_FS.remove_tree(staging)
    counters = read_counters(p.result)
    if not infos:
        raise BadInputError(f"{config.input}: no text to make sequences from")
    tokenizer_dir = BEAM_FS.join(out, TOKENIZER_DIR)
    BEAM_FS.remove_tree(tokenizer_dir)  # files of an earlier, different tokenizer must not linger
    _copy_tokenizer(info, tokenizer_dir)
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
        premask=config.masking(),
        dupe_factor=config.dupe_factor,
        settings=config.build_settings(),
        stats=counters,
        shards=tuple(infos),
        created_by=_created_by(),
    )
    write_manifest(out, manifest, BEAM_FS)
    return manifest


def _read_infos(directory: str) -> list[ShardInfo]:
    infos = []
    for name in BEAM_FS.listdir(directory):
        with BEAM_FS.open(BEAM_FS.join(directory, name)) as f:
            text = f.read().decode("utf-8")
        infos.extend(ShardInfo(**json.loads(line)) for line in text.splitlines() if line.strip())
    return infos


def _copy_tokenizer(info: TokenizerInfo, directory: str) -> None:
    """The tokenizer files a shard set keeps beside itself, written through Beam's
    FileSystems; a plain vocab.txt is saved as tokenizer.json + vocab.txt."""
    BEAM_FS.mkdirs(directory)
    src = Path(info.path)
    if src.name.endswith(".txt"):
        files = {"tokenizer.json": info.tokenizer.to_str().encode(), "vocab.txt": src.read_bytes()}
    else:
        files = {
            f.name: f.read_bytes()
            for f in sorted(src.parent.iterdir())
            if f.is_file() and f.suffix in (".json", ".txt")
        }
    for name, data in files.items():
        with BEAM_FS.create(BEAM_FS.join(directory, name)) as f:
            f.write(data)


def _created_by() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"clozeworks {version('clozeworks')}"
    except PackageNotFoundError:
        return "clozeworks"
