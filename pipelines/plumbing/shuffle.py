"""Grouping by key through files, so memory is bounded by a bucket, not by the corpus.

Beam's local runners hold every grouping in memory: the whole PCollection that enters a
GroupByKey waits, encoded, in one buffer until the stage before it is done.
`GroupThroughFiles` is a GroupByKey whose values cross through files written with Beam's
FileSystems instead:

    (key, value) --Spill-->       files of records sorted by bucket (a hash of the key)
                 --GroupSpills--> (bucket, [(file, start, end)]): an element per bucket and file
                 --ReadBuckets--> (key, [values]), one bucket in memory at a time

Only file ranges go through Beam's own GroupByKey. The same transform runs on any runner
(local disk or gs:// alike); `Shuffle` picks it or Beam's GroupByKey, so a pipeline says
once how its groupings cross. Values of a key come out sorted by their encoded bytes, and
keys of a bucket in the order of theirs, so the result does not depend on how elements
were bundled or how many workers wrote them.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
from apache_beam.coders import Coder, VarIntCoder
from apache_beam.transforms.window import GlobalWindows

from clozeworks.pipelines.plumbing.beamfs import BEAM_FS, FileSystemsDoFn
from clozeworks.pipelines.plumbing.counters import runner_counter

_RECORD = struct.Struct("<II")  # key length, value length
# Bytes a Spill DoFn buffers before it writes a file; the bound on its memory.
SPILL_BYTES = 64 << 20
# A bucket should hold about this much, so reading one stays far below the memory goal;
# its count grows with the data up to MAX_BUCKETS (48 TB at 48 MB each).
BUCKET_BYTES = 48 << 20
MAX_BUCKETS = 1 << 20


def buckets_for(data_bytes: int, bucket_bytes: int | None = None) -> int:
    """Buckets for `data_bytes` of shuffled data, each about `bucket_bytes` (BUCKET_BYTES)
    or less: a power of two from 16 up to MAX_BUCKETS."""
    want = max(16, min(MAX_BUCKETS, -(-data_bytes // (bucket_bytes or BUCKET_BYTES))))
    return 1 << (want - 1).bit_length()


def _bucket(key: bytes, buckets: int) -> int:
    # crc32, not hash(): it must be the same in every worker process.
    return zlib.crc32(key) % buckets


class _Spill(FileSystemsDoFn):
    """(key, value) -> (bucket, (path, start, end)) for every bucket of every file written.

    Integer keys (VarIntCoder) go to bucket `key % buckets`: the shard pipeline's keys are
    group, bucket and shard numbers from 0 up, so every bucket gets the same number of
    them, where a hash would pile several into one now and then (and the fullest bucket,
    read whole, sets peak memory). Other keys go by crc32."""

    def __init__(
        self,
        directory: str,
        buckets: int,
        key_coder: Coder,
        value_coder: Coder,
        many_keys: bool = False,
    ):
        super().__init__()
        self.directory = directory
        self.buckets = buckets
        self.key_coder = key_coder
        self.value_coder = value_coder
        self.int_keys = isinstance(key_coder, VarIntCoder)
        self.many_keys = many_keys

    def start_bundle(self) -> None:
        self._parts: dict[int, list[bytes]] = {}
        self._size = 0

    def process(self, element: tuple[Any, Any]) -> Iterator[tuple[int, tuple[str, int, int]]]:
        value = self.value_coder.encode(element[1])
        for raw_key in element[0] if self.many_keys else (element[0],):
            key = self.key_coder.encode(raw_key)
            record = b"".join((_RECORD.pack(len(key), len(value)), key, value))
            bucket = raw_key % self.buckets if self.int_keys else _bucket(key, self.buckets)
            self._parts.setdefault(bucket, []).append(record)
            self._size += len(record)
        if self._size >= SPILL_BYTES:
            yield from self._write()

    def finish_bundle(self) -> Iterator[Any]:
        for item in self._write():
            yield GlobalWindows.windowed_value(item)

    def _write(self) -> Iterator[tuple[int, tuple[str, int, int]]]:
        if not self._parts:
            return
        path = BEAM_FS.join(self.directory, f"{uuid.uuid4().hex}.spill")
        ranges = []
        offset = 0
        with BEAM_FS.create(path) as f:
            for bucket in sorted(self._parts):
                data = b"".join(self._parts[bucket])
                f.write(data)
                ranges.append((bucket, (path, offset, offset + len(data))))
                offset += len(data)
        runner_counter("shuffle.files").inc()
        runner_counter("shuffle.bytes").inc(offset)
        self._parts, self._size = {}, 0
        yield from ranges


def _records(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    view = memoryview(data)
    pos, end = 0, len(data)
    while pos < end:
        klen, vlen = _RECORD.unpack_from(view, pos)
        pos += _RECORD.size
        yield bytes(view[pos : pos + klen]), bytes(view[pos + klen : pos + klen + vlen])
        pos += klen + vlen


class _ReadBucket(FileSystemsDoFn):
    """(bucket, [(path, start, end)]) -> (key, [values]) for every key of the bucket with
    at least `min_values` values."""

    def __init__(self, key_coder: Coder, value_coder: Coder, min_values: int = 1):
        super().__init__()
        self.key_coder = key_coder
        self.value_coder = value_coder
        self.min_values = min_values

    def process(self, item: tuple[int, Iterable[tuple[str, int, int]]]) -> Iterator[Any]:
        groups: dict[bytes, list[bytes]] = {}
        for path, start, end in sorted(item[1]):
            with BEAM_FS.open(path) as f:
                f.seek(start)
                data = f.read(end - start)
            for key, value in _records(data):
                groups.setdefault(key, []).append(value)
            del data
        keys = [k for k, v in groups.items() if len(v) >= self.min_values]
        for key in sorted(keys):
            values = sorted(groups.pop(key))
            yield self.key_coder.decode(key), [self.value_coder.decode(v) for v in values]


class GroupThroughFiles(beam.PTransform):
    """(key, value) -> (key, [values]), as beam.GroupByKey, through files under `directory`
    (which the caller removes when the pipeline is done, on success or failure).

    The input may be a tuple of PCollections: each is spilled where it is made. (A Flatten
    before the spill would not be: on the DirectRunner a Flatten that feeds a DoFn holds
    its whole output in memory.)
    """

    def __init__(
        self,
        directory: str,
        buckets: int,
        key_coder: Coder,
        value_coder: Coder,
        many_keys: bool = False,
        min_values: int = 1,
    ):
        super().__init__()
        self.spill = _Spill(directory, buckets, key_coder, value_coder, many_keys)
        self.read = _ReadBucket(key_coder, value_coder, min_values)

    def expand(self, pairs: Any) -> Any:
        if isinstance(pairs, tuple | list):
            spilled = [pc | f"Spill{i}" >> beam.ParDo(self.spill) for i, pc in enumerate(pairs)]
            ranges = spilled | "AllSpills" >> beam.Flatten()
        else:
            ranges = pairs | "Spill" >> beam.ParDo(self.spill)
        return ranges | "GroupSpills" >> beam.GroupByKey() | "ReadBuckets" >> beam.ParDo(self.read)


class _FlattenAndGroup(beam.PTransform):
    """beam.GroupByKey over one PCollection or a tuple of them."""

    def expand(self, pairs: Any) -> Any:
        if isinstance(pairs, tuple | list):
            pairs = pairs | "Flatten" >> beam.Flatten()
        return pairs | "GroupByKey" >> beam.GroupByKey()


def _each_key(element: tuple[Iterable[Any], Any]) -> Iterator[tuple[Any, Any]]:
    for key in element[0]:
        yield key, element[1]


def _shared(item: tuple[Any, Iterable[Any]]) -> bool:
    return len(list(item[1])) >= 2


class _CollideInMemory(beam.PTransform):
    """`Shuffle.collisions` with Beam's GroupByKey."""

    def expand(self, pairs: Any) -> Any:
        return (
            pairs
            | "EachKey" >> beam.FlatMap(_each_key)
            | "GroupByKey" >> beam.GroupByKey()
            | "Shared" >> beam.Filter(_shared)
        )


class _Tagged(Coder):  # type: ignore[misc]
    """(index of the input, value) with each input's own coder."""

    def __init__(self, coders: Sequence[Coder]):
        self.coders = list(coders)

    def encode(self, value: tuple[int, Any]) -> bytes:
        return bytes((value[0],)) + self.coders[value[0]].encode(value[1])

    def decode(self, encoded: bytes) -> tuple[int, Any]:
        return encoded[0], self.coders[encoded[0]].decode(encoded[1:])

    def is_deterministic(self) -> bool:
        return all(c.is_deterministic() for c in self.coders)


def _tag(pair: tuple[Any, Any], index: int) -> tuple[Any, tuple[int, Any]]:
    return pair[0], (index, pair[1])


def _untag(item: tuple[Any, list[tuple[int, Any]]], tags: Sequence[str]) -> Any:
    joined: dict[str, list[Any]] = {tag: [] for tag in tags}
    for index, value in item[1]:
        joined[tags[index]].append(value)
    return item[0], joined


@dataclass(frozen=True)
class Shuffle:
    """How a pipeline's groupings cross between stages: through files under `directory`
    (memory bounded by a bucket), or, with no directory, Beam's own GroupByKey (what a
    distributed runner's shuffle service does best)."""

    directory: str | None = None
    buckets: int = 64

    def group_by_key(self, name: str, key_coder: Coder, value_coder: Coder) -> beam.PTransform:
        """A PTransform (key, value) -> (key, iterable of values), applied to one
        PCollection or a tuple of them."""
        if self.directory is None:
            return _FlattenAndGroup()
        return GroupThroughFiles(
            BEAM_FS.join(self.directory, name), self.buckets, key_coder, value_coder
        )

    def collisions(self, name: str, key_coder: Coder, value_coder: Coder) -> beam.PTransform:
        """A PTransform (keys, value) -> (key, values) for every key that two or more values
        share: MinHash bands, where most keys have one value and are never grouped. Each
        element carries all its keys, so the pipeline handles one element per value."""
        if self.directory is None:
            return _CollideInMemory()
        return GroupThroughFiles(
            BEAM_FS.join(self.directory, name),
            self.buckets,
            key_coder,
            value_coder,
            many_keys=True,
            min_values=2,
        )

    def group_by_part(self, name: str, parts: int, value_coder: Coder) -> beam.PTransform:
        """A PTransform (part, value) -> (part, iterable of values) for integer parts in
        [0, parts): each part is a bucket of its own, so one is read at a time."""
        if self.directory is None:
            return _FlattenAndGroup()
        return GroupThroughFiles(
            BEAM_FS.join(self.directory, name), parts, VarIntCoder(), value_coder
        )

    def co_group_by_key(
        self, name: str, key_coder: Coder, value_coders: Mapping[str, Coder]
    ) -> beam.PTransform:
        """A PTransform {tag: (key, value)} -> (key, {tag: values}), as beam.CoGroupByKey."""
        if self.directory is None:
            return beam.CoGroupByKey()
        return _CoGroupThroughFiles(
            self.group_by_key(
                name, key_coder, _Tagged([value_coders[t] for t in sorted(value_coders)])
            ),
            sorted(value_coders),
        )


class _CoGroupThroughFiles(beam.PTransform):
    def __init__(self, group: beam.PTransform, tags: Sequence[str]):
        super().__init__()
        self.group = group
        self.tags = list(tags)

    def expand(self, inputs: Mapping[str, Any]) -> Any:
        if sorted(inputs) != self.tags:
            raise ValueError(f"inputs {sorted(inputs)} do not match the coders' {self.tags}")
        tagged = tuple(
            inputs[tag] | f"Tag{tag.title()}" >> beam.Map(_tag, i)
            for i, tag in enumerate(self.tags)
        )
        return tagged | "Group" >> self.group | "Untag" >> beam.Map(_untag, self.tags)
