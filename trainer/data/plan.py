"""Which sequences go into which batch, on which rank: pure arithmetic, no I/O.

An epoch is one stream of every sequence: the shards in an order drawn from (seed, epoch),
each shard's sequences in stored order (the build shuffled them across the corpus). Rank r
of W takes the r-th of W equal contiguous parts, so ranks never share a sequence and all
get the same count even when shards are fewer than ranks or uneven; the remainder (fewer
than W sequences) and the sequences that do not fill a last batch are left out of the epoch.

A rank's part is cut into `streams` contiguous ranges, and batch j of the rank comes from
range j % streams. A range is read in windows of a few batches; each window is shuffled
with a permutation drawn from (seed, epoch, window start). Nothing here depends on the
number of loader workers: a worker computes the batches it is asked for, so the batch
sequence is the same with 0, 2 or 3 workers, and resuming at batch t needs only the windows
from t on, never a replay of what came before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# The default number of read ranges per rank: divisible by 1, 2, 3, 4, 6, 8, 12 and 24 so
# that those worker counts each read whole ranges; any other count works, reading more.
DEFAULT_STREAMS = 24


@dataclass(frozen=True)
class Layout:
    """Everything the order of batches depends on (the loader state records it)."""

    sizes: tuple[int, ...]  # sequences per shard, in the dataset's shard order
    batch_size: int
    world_size: int
    streams: int
    window: int  # sequences per shuffle window, a multiple of batch_size
    bucketing: bool = False

    @classmethod
    def build(
        cls,
        sizes: tuple[int, ...],
        batch_size: int,
        world_size: int,
        streams: int,
        shuffle_buffer: int,
        bucketing: bool = False,
    ) -> Layout:
        window = max(1, shuffle_buffer // streams // batch_size) * batch_size
        return cls(sizes, batch_size, world_size, streams, window, bucketing)

    @property
    def sequences(self) -> int:
        return sum(self.sizes)

    def batches_per_rank(self) -> int:
        return self.sequences // self.world_size // self.batch_size

    def to_dict(self) -> dict[str, object]:
        return {
            "shards": len(self.sizes),
            "sequences": self.sequences,
            "batch_size": self.batch_size,
            "world_size": self.world_size,
            "streams": self.streams,
            "window": self.window,
            "bucketing": self.bucketing,
        }


@dataclass(frozen=True)
class Segment:
    """Sequences [start, stop) of shard `shard` (an index into the dataset's shards)."""

    shard: int
    start: int
    stop: int


class EpochPlan:
    """One rank's epoch: where each of its batches comes from.

    `positions` (sorted epoch positions) restricts the epoch to those sequences: the rest
    of an epoch that a run with another world size began (`remaining_positions`). Plan
    index i then stands for epoch position positions[i]; everything else is the same.
    """

    def __init__(
        self,
        layout: Layout,
        seed: int,
        epoch: int,
        rank: int,
        positions: np.ndarray | None = None,
    ) -> None:
        if not 0 <= rank < layout.world_size:
            raise ValueError(f"rank {rank} is outside world size {layout.world_size}")
        self.layout = layout
        self.seed = seed
        self.epoch = epoch
        self.positions = positions
        self.order = shard_order(seed, epoch, len(layout.sizes))
        sizes = np.asarray(layout.sizes, dtype=np.int64)[self.order]
        self.ends = np.cumsum(sizes)  # epoch position after each shard in `order`
        count = layout.sequences if positions is None else len(positions)
        self.batches = count // layout.world_size // layout.batch_size
        per_rank = count // layout.world_size
        b, n = layout.batch_size, layout.streams
        counts = np.array([self.batches // n + (s < self.batches % n) for s in range(n)])
        self.stream_batches = counts
        self.stream_start = rank * per_rank + b * np.concatenate([[0], np.cumsum(counts)[:-1]])

    def locate(self, j: int) -> tuple[int, int]:
        """Batch j of the rank -> (stream, batch number within the stream)."""
        if not 0 <= j < self.batches:
            raise IndexError(f"batch {j} of an epoch of {self.batches}")
        return j % self.layout.streams, j // self.layout.streams

    def window_of(self, stream: int, q: int) -> tuple[int, int, int]:
        """(window number, its first epoch position, its length) holding batch q of a stream."""
        size = self.layout.window
        w = q * self.layout.batch_size // size
        total = int(self.stream_batches[stream]) * self.layout.batch_size
        start = w * size
        return w, int(self.stream_start[stream]) + start, min(size, total - start)

    def segments(self, start: int, stop: int) -> list[Segment]:
        """The shard ranges that plan indices [start, stop) fall in, in order."""
        if self.positions is None:
            return self._segments(start, stop)
        chosen = self.positions[start:stop]
        breaks = np.flatnonzero(np.diff(chosen) != 1) + 1
        out: list[Segment] = []
        for run in np.split(chosen, breaks):
            if len(run):
                out.extend(self._segments(int(run[0]), int(run[-1]) + 1))
        return out

    def batch_positions(self, j: int) -> np.ndarray:
        """The epoch positions of batch j (without reading anything: no bucketing)."""
        stream, q = self.locate(j)
        w, start, length = self.window_of(stream, q)
        order = self.window_order(start, np.zeros(length, dtype=np.int64))
        first = q * self.layout.batch_size - w * self.layout.window
        picked = start + order[first : first + self.layout.batch_size]
        return picked if self.positions is None else self.positions[picked]

    def _segments(self, start: int, stop: int) -> list[Segment]:
        """The shard ranges that epoch positions [start, stop) fall in, in order."""
        out: list[Segment] = []
        pos = start
        while pos < stop:
            slot = int(np.searchsorted(self.ends, pos, side="right"))
            shard_end = int(self.ends[slot])
            first = shard_end - self.layout.sizes[self.order[slot]]
            end = min(stop, shard_end)
            out.append(Segment(int(self.order[slot]), pos - first, end - first))
            pos = end
        return out

    def next_shard(self, shard: int) -> int:
        """The shard after `shard` in this epoch's order, wrapping around."""
        slot = int(np.flatnonzero(self.order == shard)[0])
        return int(self.order[(slot + 1) % len(self.order)])

    def window_order(self, start: int, lengths: np.ndarray) -> np.ndarray:
        """Order of a window's sequences (positions into it), drawn from (seed, epoch, start).

        With bucketing, the window is sorted by length, cut into batches, and the batches
        are shuffled: batches of similar lengths pad less, and their order stays random.
        """
        rng = np.random.default_rng([self.seed, self.epoch, start, 0xB10C])
        order = rng.permutation(len(lengths))
        if not self.layout.bucketing:
            return order
        order = order[np.argsort(lengths[order], kind="stable")]
        b = self.layout.batch_size
        batches = rng.permutation(len(order) // b)
        return order.reshape(-1, b)[batches].reshape(-1)


def shard_order(seed: int, epoch: int, n: int) -> np.ndarray:
    return np.random.default_rng([seed, epoch, 0x5EED]).permutation(n)


def remaining_positions(
    layout_sizes: tuple[int, ...],
    seed: int,
    epoch: int,
    history: list[tuple[Layout, int]],
) -> np.ndarray:
    """The epoch positions not yet read after the runs in `history`, each (its layout,
    batches every rank of it had taken): the rest of an epoch, for a run that resumes
    with another world size. Sorted. Needs no reading (bucketing is refused earlier:
    its order depends on sequence lengths)."""
    positions: np.ndarray | None = None
    for layout, taken in history:
        total = sum(layout_sizes) if positions is None else len(positions)
        used = np.zeros(total, dtype=bool)
        for rank in range(layout.world_size):
            plan = EpochPlan(layout, seed, epoch, rank, positions)
            for j in range(min(taken, plan.batches)):
                picked = plan.batch_positions(j)
                index = picked if positions is None else np.searchsorted(positions, picked)
                used[index] = True
        base = np.arange(total, dtype=np.int64) if positions is None else positions
        positions = base[~used]
    assert positions is not None
    return positions
