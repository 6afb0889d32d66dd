"""Reading an epoch plan's windows from shards, with the corruption policy.

`EpochReader.batch(j)` returns the sequences of batch j of a rank as a `Pool` (flat
arrays). It keeps one open shard reader per stream, so consecutive windows continue where
the last one stopped instead of reopening the shard.

Corruption (`on_error`): "raise" (the default) raises `ShardFormatError` naming the shard
and byte offset. "skip" reports the damage once (an event the loader turns into one
warning) and fills the damaged sequences' places from the next readable shard of the
epoch's order, so every rank still yields the same number of batches and DDP never hangs.
What is damaged is a property of the file, whoever reads it: a block whose content is bad
(only that block), or a point from which the tar cannot be read (every block from there),
or the whole shard (wrong size or checksum). So a resumed run fills the same places from
the same sequences.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from clozeworks.corpus.shards.blocks import Block, ShardFormatError
from clozeworks.corpus.shards.counter_rng import sequence_keys_array
from clozeworks.corpus.shards.reader import BlockError, ShardReader
from clozeworks.schemas.kinds import ON_ERROR
from clozeworks.trainer.data.plan import EpochPlan
from clozeworks.trainer.data.source import ShardSet


@dataclass
class Damage:
    """What is unreadable in one shard."""

    message: str
    from_block: int | None = None  # nothing from here on can be read
    blocks: set[int] = field(default_factory=set)  # single damaged blocks

    def bad(self, k: int) -> bool:
        return k in self.blocks or (self.from_block is not None and k >= self.from_block)


@dataclass
class Knowledge:
    """What this process has learned about the shards (the loader carries it across epochs
    and workers report what they learn, so nothing is verified or warned about twice)."""

    verified: set[str] = field(default_factory=set)
    damage: dict[str, Damage] = field(default_factory=dict)


@dataclass
class Pool:
    """Sequences as flat arrays: sequence i is tokens[offsets[i]:offsets[i+1]]."""

    tokens: np.ndarray  # int64
    offsets: np.ndarray  # int64 [n+1]
    index: np.ndarray  # int64 [n], global sequence index (the masking key)
    substituted: np.ndarray  # bool [n], filled in from another shard after damage
    segments: np.ndarray | None = None  # int16 [n]
    labels: np.ndarray | None = None  # int8 [n]
    mlm_positions: np.ndarray | None = None
    mlm_offsets: np.ndarray | None = None
    mlm_labels: np.ndarray | None = None
    keys: np.ndarray | None = None  # int64 [n], masking keys of (seed, epoch, index)

    def __len__(self) -> int:
        return len(self.index)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @classmethod
    def concat(cls, pieces: list[tuple[Block, int, int, int, bool]]) -> Pool:
        """Join (block, first, stop, first global index, substituted) slices of blocks."""
        tokens, offsets, index, subst = [], [np.zeros(1, np.int64)], [], []
        segments, labels, positions, mlm_offsets, mlm_labels = [], [], [], [], []
        total = predicted = 0
        for block, lo, hi, first, substituted in pieces:
            off = block.offsets[lo : hi + 1]
            tokens.append(block.tokens[off[0] : off[-1]])
            offsets.append(off[1:] - off[0] + total)
            total += int(off[-1] - off[0])
            index.append(np.arange(first, first + hi - lo, dtype=np.int64))
            subst.append(np.full(hi - lo, substituted))
            if block.segments is not None and block.labels is not None:
                segments.append(block.segments[lo:hi])
                labels.append(block.labels[lo:hi])
            if block.mlm_offsets is not None:
                assert block.mlm_positions is not None and block.mlm_labels is not None
                mo = block.mlm_offsets[lo : hi + 1]
                positions.append(block.mlm_positions[mo[0] : mo[-1]])
                mlm_labels.append(block.mlm_labels[mo[0] : mo[-1]])
                mlm_offsets.append(mo[1:] - mo[0] + predicted)
                predicted += int(mo[-1] - mo[0])
        pool = cls(
            # int64 once per window, so a batch is a single gather
            tokens=np.concatenate(tokens).astype(np.int64),
            offsets=np.concatenate(offsets),
            index=np.concatenate(index),
            substituted=np.concatenate(subst),
        )
        if segments:
            pool.segments = np.concatenate(segments)
            pool.labels = np.concatenate(labels)
        if mlm_offsets:
            pool.mlm_positions = np.concatenate(positions)
            pool.mlm_labels = np.concatenate(mlm_labels)
            pool.mlm_offsets = np.concatenate([np.zeros(1, np.int64), *mlm_offsets])
        return pool


def ranges(starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flat indices of the concatenated ranges [starts[i], stops[i]), and their offsets."""
    lengths = stops - starts
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.arange(offsets[-1], dtype=np.int64) + np.repeat(starts - offsets[:-1], lengths)
    return flat, offsets


class _Stream:
    """One stream's open shard reader, its last block, and its current window."""

    def __init__(self) -> None:
        self.reader: ShardReader | None = None
        self.shard = -1
        self.last: tuple[int, int, Block] | None = None  # (shard, block number, block)
        self.window = -1
        self.pool: Pool | None = None
        self.order: np.ndarray | None = None

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
        self.reader, self.shard = None, -1


class EpochReader:
    """Batches of one rank's epoch, read window by window."""

    def __init__(
        self,
        shards: ShardSet,
        plan: EpochPlan,
        knowledge: Knowledge,
        verify: bool,
        on_error: str,
    ) -> None:
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
        self.shards = shards
        self.plan = plan
        self.knowledge = knowledge
        self.verify = verify
        self.on_error = on_error
        # What the loader should hear: ("verified", shard, None), ("damaged", shard, Damage).
        self.events: list[tuple[str, str, Damage | None]] = []
        self._streams: dict[int, _Stream] = {}

    def batch(self, j: int) -> tuple[Pool, np.ndarray]:
        """Batch j of the rank: (its window's pool, the positions of its sequences there)."""
        stream, q = self.plan.locate(j)
        state = self._streams.setdefault(stream, _Stream())
        w, start, length = self.plan.window_of(stream, q)
        if state.window != w:
            state.pool = self._read(state, start, length)
            state.order = self.plan.window_order(start, state.pool.lengths)
            state.window = w
        assert state.pool is not None and state.order is not None
        b = self.plan.layout.batch_size
        first = q * b - w * self.plan.layout.window
        return state.pool, state.order[first : first + b]

    def close(self) -> None:
        for state in self._streams.values():
            state.close()

    def _read(self, state: _Stream, start: int, length: int) -> Pool:
        pieces: list[tuple[Block, int, int, int, bool]] = []
        for seg in self.plan.segments(start, start + length):
            lo = self.shards.span(seg.shard)[0]  # plan positions count from the range's start
            a, b = lo + seg.start, lo + seg.stop
            first = self.shards.first_index[seg.shard] + a
            self._read_into(pieces, state, seg.shard, a, b, first, {seg.shard})
        pool = Pool.concat(pieces)
        # Keys for the whole window at once: per batch, the small array ops would cost more.
        pool.keys = sequence_keys_array(self.plan.seed, self.plan.epoch, pool.index)
        return pool

    def _read_into(
        self,
        pieces: list[tuple[Block, int, int, int, bool]],
        state: _Stream,
        shard: int,
        start: int,
        stop: int,
        first_index: int,
        tried: set[int],
    ) -> None:
        """Append sequences [start, stop) of `shard`; damaged ones come from a substitute."""
        spec = self.shards.specs[shard]
        size = spec.block_size
        substituted = len(tried) > 1
        pos = start
        while pos < stop:
            k = pos // size
            end = min(stop, (k + 1) * size)
            index = first_index + pos - start
            damage = self.knowledge.damage.get(spec.name)
            if damage is not None and damage.bad(k):
                self._substitute(pieces, state, shard, pos, end, index, tried)
                pos = end
                continue
            try:
                block = self._block(state, shard, k)
            except BlockError as err:
                if self.on_error == "raise":
                    raise
                self._note_damage(spec.name, err).blocks.add(err.block)
                self._substitute(pieces, state, shard, pos, end, index, tried)
            except _Unreadable as err:
                if self.on_error == "raise":
                    raise err.original from None
                damage = self._note_damage(spec.name, err.original)
                damage.from_block = (
                    err.from_block
                    if damage.from_block is None
                    else min(err.from_block, damage.from_block)
                )
                self._substitute(pieces, state, shard, pos, end, index, tried)
            else:
                lo = pos - k * size
                pieces.append((block, lo, lo + end - pos, index, substituted))
            pos = end

    def _substitute(
        self,
        pieces: list[tuple[Block, int, int, int, bool]],
        state: _Stream,
        shard: int,
        start: int,
        stop: int,
        first_index: int,
        tried: set[int],
    ) -> None:
        other = self.plan.next_shard(shard)
        while other in tried:
            if len(tried) == len(self.shards.specs):
                names = ", ".join(self.shards.specs[i].name for i in sorted(tried))
                raise ShardFormatError(names, "every shard", "damaged: nothing left to read")
            other = self.plan.next_shard(other)
        lo, hi = self.shards.span(other)  # only the part this set reads (not held out)
        size = hi - lo
        if size == 0:
            self._substitute(pieces, state, other, start, stop, first_index, tried | {other})
            return
        # Same places in the substitute, wrapping if it is shorter.
        pos = start
        while pos < stop:
            a = lo + pos % size
            b = min(hi, a + stop - pos)
            index = first_index + pos - start
            self._read_into(pieces, state, other, a, b, index, tried | {other})
            pos += b - a

    def _note_damage(self, name: str, err: ShardFormatError) -> Damage:
        damage = self.knowledge.damage.get(name)
        if damage is None:
            damage = self.knowledge.damage[name] = Damage(str(err))
            self.events.append(("damaged", name, damage))
        return damage

    def _block(self, state: _Stream, shard: int, k: int) -> Block:
        """Block k of `shard`: BlockError if only it is damaged, _Unreadable if the shard
        cannot be read from some block <= k on."""
        if state.last is not None and state.last[:2] == (shard, k):
            return state.last[2]
        name = self.shards.specs[shard].name
        reader = state.reader
        if reader is None or state.shard != shard or reader.next_block > k:
            state.close()
            verify = self.verify and name not in self.knowledge.verified
            try:
                url = self.shards.readable_url(shard)
                reader = ShardReader(url, self.shards.specs[shard], verify)
            except ShardFormatError as err:
                raise _Unreadable(err, 0) from None
            if verify:
                self.knowledge.verified.add(name)
                self.events.append(("verified", name, None))
            state.reader, state.shard = reader, shard
        try:
            block = reader.read(k)
        except BlockError:
            raise
        except ShardFormatError as err:
            failed_at = reader.next_block  # the block whose members were being read
            state.close()
            raise _Unreadable(err, failed_at) from None
        state.last = (shard, k, block)
        return block


class _Unreadable(Exception):
    """Nothing of a shard can be read from block `from_block` on."""

    def __init__(self, original: ShardFormatError, from_block: int) -> None:
        super().__init__(str(original))
        self.original = original
        self.from_block = from_block
