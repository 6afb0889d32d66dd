"""Writing shards in Beam: each shard's blocks (statically masked with `--premask`) as a tar
under a temporary name, renamed when complete, and its manifest entry."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import apache_beam as beam
import numpy as np

from clozeworks.corpus.shards.blocks import make_block, write_blocks
from clozeworks.corpus.shards.instances import SequenceBatch
from clozeworks.corpus.shards.settings import ShardSettings
from clozeworks.corpus.shards.words import SegmentedWords, segmented_words
from clozeworks.corpus.vocab.files import TOKEN_COUNTS_FILE
from clozeworks.corpus.vocab.train import TokenizerInfo
from clozeworks.pipelines.plumbing.beamfs import BEAM_FS, FileSystemsDoFn
from clozeworks.pipelines.plumbing.counters import counter
from clozeworks.pipelines.plumbing.progress import Tally
from clozeworks.schemas.manifest import ShardInfo
from clozeworks.schemas.masking import MaskingSettings

if TYPE_CHECKING:
    from clozeworks.corpus.shards.premask import StaticMasker

# Progress count (pipelines.progress) of sequences written to shards.
SEQUENCES_WRITTEN = "sequences_written"
INFOS = "infos"


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
    words: SegmentedWords | None = None  # a segmenter's words (Chinese, Japanese)

    def masker(self) -> StaticMasker:
        from clozeworks.corpus.shards.masking import MaskTables
        from clozeworks.corpus.shards.premask import StaticMasker

        counts = None if self.counts is None else list(self.counts)
        tables = MaskTables.build(
            self.vocab_size,
            list(self.special_ids),
            list(self.word_start),
            self.mask_id,
            counts,
            self.words,
        )
        return StaticMasker(tables, self.settings, self.seed, self.pad_id)


class _WriteShard(FileSystemsDoFn):
    """(shard, [(positions, SequenceBatch)]) -> the shard's manifest entry as JSON."""

    def __init__(
        self, output: str, block_size: int, token_dtype: str, pairs: bool, mask: MaskSpec | None
    ) -> None:
        super().__init__()
        self.output = output
        self.block_size = block_size
        self.token_dtype = token_dtype
        self.pairs = pairs
        self.mask = mask
        self.masker: StaticMasker | None = None

    def setup(self) -> None:
        super().setup()
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
                documents=(
                    (part.docs, part.doc_offsets)
                    if part.docs is not None and part.doc_offsets is not None
                    else None
                ),
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


def mask_spec(
    config: ShardSettings, info: TokenizerInfo, counts: list[int] | None
) -> MaskSpec | None:
    """What the workers need to mask statically, with the tokenizer's token counts (for
    replacements by corpus frequency); None without `premask`."""
    settings = config.masking()
    if settings is None:
        return None
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
        words=(
            None
            if settings.kind == "token"
            else segmented_words(config.text_language, info.tokens(), info.special)
        ),
    )


class WriteShards(beam.PTransform):
    """(shard, [(positions, SequenceBatch)]) -> shard files in `output`, and each shard's
    manifest entry as a line of `infos*` in `staging` (read back with `read_infos`)."""

    def __init__(
        self,
        output: str,
        staging: str,
        block_size: int,
        token_dtype: str,
        pairs: bool,
        mask: MaskSpec | None,
    ) -> None:
        super().__init__()
        self.write = _WriteShard(output, block_size, token_dtype, pairs, mask)
        self.staging = staging

    def expand(self, dealt: Any) -> Any:
        return (
            dealt
            | "WriteShards" >> beam.ParDo(self.write)
            | "RecordShards" >> beam.io.WriteToText(BEAM_FS.join(self.staging, INFOS))
        )


def read_infos(staging: str) -> list[ShardInfo]:
    """The manifest entries `WriteShards` recorded, by shard name."""
    infos = []
    for name in BEAM_FS.listdir(staging):
        if not name.startswith(INFOS):
            continue
        with BEAM_FS.open(BEAM_FS.join(staging, name)) as f:
            text = f.read().decode("utf-8")
        infos.extend(ShardInfo(**json.loads(line)) for line in text.splitlines() if line.strip())
    return sorted(infos, key=lambda s: s.name)
