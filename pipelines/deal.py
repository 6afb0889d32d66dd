"""Dealing sequences to shards in Beam: a global shuffle (`corpus.shards.dealing`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.coders import VarIntCoder

from clozeworks.corpus.shards import dealing
from clozeworks.corpus.shards.instances import SequenceBatch
from clozeworks.pipelines.plumbing.coders import ArraysCoder
from clozeworks.pipelines.plumbing.shuffle import Shuffle

Placed = tuple[np.ndarray, SequenceBatch]  # (positions in the shard, the sequences there)


def _bucket_size(item: tuple[int, SequenceBatch]) -> tuple[int, int]:
    return item[0], len(item[1])


class _Deal(beam.DoFn):
    """(bucket, [SequenceBatch]) -> (shard, (positions, SequenceBatch)), one element per
    shard the bucket's sequences go to, given every bucket's count."""

    def __init__(self, num_shards: int | None, per_shard: int | None) -> None:
        self.num_shards = num_shards
        self.per_shard = per_shard
        self._offsets: dict[int, int] | None = None

    def process(
        self, item: tuple[int, Iterable[SequenceBatch]], counts: dict[int, int]
    ) -> Iterator[tuple[int, Placed]]:
        if self._offsets is None or len(self._offsets) != len(counts):
            self._offsets = dealing.bucket_offsets(counts)
        bucket, batches = item
        shards = dealing.number_of_shards(sum(counts.values()), self.num_shards, self.per_shard)
        batch = SequenceBatch.concat(list(batches))
        for shard, positions, part in dealing.deal_bucket(batch, self._offsets[bucket], shards):
            yield shard, (positions, part)


def _placed_to_arrays(placed: Placed) -> list[np.ndarray]:
    return [placed[0], *placed[1].to_arrays()]


def _placed_from_arrays(parts: Sequence[np.ndarray]) -> Placed:
    return parts[0], SequenceBatch.from_arrays(parts[1:])


BATCH_CODER = ArraysCoder(SequenceBatch.to_arrays, SequenceBatch.from_arrays)
PLACED_CODER = ArraysCoder(_placed_to_arrays, _placed_from_arrays)


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
            >> beam.ParDo(_Deal(self.num_shards, self.per_shard), beam.pvalue.AsDict(counts))
            | "GroupShards" >> self.shuffle.group_by_key("shards", VarIntCoder(), PLACED_CODER)
        )
