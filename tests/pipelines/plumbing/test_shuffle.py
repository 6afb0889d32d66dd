"""Grouping through files gives what Beam's GroupByKey and CoGroupByKey give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
import pytest
from apache_beam.coders import FastPrimitivesCoder, StrUtf8Coder, VarIntCoder
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from clozeworks.corpus.shards.instances import SequenceBatch
from clozeworks.pipelines.plumbing import shuffle as shuffle_module
from clozeworks.pipelines.plumbing.coders import ArraysCoder
from clozeworks.pipelines.plumbing.runner import LocalRunner
from clozeworks.pipelines.plumbing.shuffle import Shuffle, buckets_for
from clozeworks.pipelines.write_store import WriteParquetParts
from clozeworks.schemas.documents import DOCUMENT

PAIRS = [(i % 7, f"v{i:03d}") for i in range(200)] + [(1000, "alone")]


def _sorted_values(item: tuple[Any, Any]) -> tuple[Any, list[Any]]:
    return item[0], sorted(item[1])


def _expected() -> list[tuple[int, list[str]]]:
    groups: dict[int, list[str]] = {}
    for key, value in PAIRS:
        groups.setdefault(key, []).append(value)
    return [(k, sorted(v)) for k, v in groups.items()]


@pytest.mark.parametrize("spill_bytes", [1 << 20, 64])
def test_group_through_files_equals_group_by_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spill_bytes: int
) -> None:
    # 64 bytes: a file every few records, so a bucket gathers ranges from many files.
    monkeypatch.setattr(shuffle_module, "SPILL_BYTES", spill_bytes)
    shuffle = Shuffle(str(tmp_path), buckets=4)
    with TestPipeline(runner=LocalRunner()) as p:
        grouped = (
            p
            | beam.Create(PAIRS)
            | shuffle.group_by_key("g", VarIntCoder(), StrUtf8Coder())
            | beam.Map(_sorted_values)
        )
        assert_that(grouped, equal_to(_expected()))
    files = list((tmp_path / "g").glob("*.spill"))
    assert (len(files) > 1) == (spill_bytes == 64)


# (keys, value): "a" and "d" are one value's alone, so they are no collision.
MANY_KEYS = [(["a", "b"], "x"), (["b", "c"], "y"), (["b"], "z"), (["c", "d"], "w"), ([], "q")]


@pytest.mark.parametrize("through_files", [True, False])
def test_collisions_are_the_keys_two_or_more_values_share(
    tmp_path: Path, through_files: bool
) -> None:
    shuffle = Shuffle(str(tmp_path) if through_files else None, buckets=4)
    with TestPipeline(runner=LocalRunner()) as p:
        grouped = (
            p
            | beam.Create(MANY_KEYS)
            | shuffle.collisions("c", StrUtf8Coder(), StrUtf8Coder())
            | beam.Map(_sorted_values)
        )
        assert_that(grouped, equal_to([("b", ["x", "y", "z"]), ("c", ["w", "y"])]))


def test_values_come_out_in_the_same_order_whatever_the_input_order(tmp_path: Path) -> None:
    def run(pairs: list[tuple[int, str]], sub: str) -> list[Any]:
        out: list[Any] = []
        with TestPipeline(runner=LocalRunner()) as p:
            grouped = (
                p
                | beam.Create(pairs, reshuffle=False)
                | Shuffle(str(tmp_path / sub), 4).group_by_key("g", VarIntCoder(), StrUtf8Coder())
            )
            assert_that(grouped, _collect(out))
        return sorted((k, list(v)) for k, v in out)

    assert run(PAIRS, "a") == run(PAIRS[::-1], "b")


def _collect(out: list[Any]) -> Any:
    def check(actual: list[Any]) -> None:
        out.extend(actual)

    return check


def test_co_group_through_files_equals_co_group_by_key(tmp_path: Path) -> None:
    left = [("a", 1), ("b", 2), ("a", 3)]
    right = [("a", "x"), ("c", "y")]

    def tidy(item: tuple[str, dict[str, Any]]) -> tuple[str, list[int], list[str]]:
        return item[0], sorted(item[1]["left"]), sorted(item[1]["right"])

    expected = [("a", [1, 3], ["x"]), ("b", [2], []), ("c", [], ["y"])]
    for shuffle in (Shuffle(), Shuffle(str(tmp_path), 2)):
        coders = {"left": VarIntCoder(), "right": FastPrimitivesCoder()}
        with TestPipeline(runner=LocalRunner()) as p:
            joined = (
                {"left": p | "L" >> beam.Create(left), "right": p | "R" >> beam.Create(right)}
                | shuffle.co_group_by_key("j", StrUtf8Coder(), coders)
                | beam.Map(tidy)
            )
            assert_that(joined, equal_to(expected))


def _batch_summary(item: tuple[int, Any]) -> tuple[int, list[int], list[int]]:
    (batch,) = item[1]
    return item[0], batch.keys.tolist(), batch.tokens.tolist()


def test_arrays_coder_carries_a_sequence_batch_through_files(tmp_path: Path) -> None:
    batch = SequenceBatch.build([5, 6], [np.array([2, 7, 3]), np.array([2, 3])], "uint16")
    coder = ArraysCoder(SequenceBatch.to_arrays, SequenceBatch.from_arrays)
    with TestPipeline(runner=LocalRunner()) as p:
        out = (
            p
            | beam.Create([(9, batch)])
            | Shuffle(str(tmp_path), 2).group_by_key("b", VarIntCoder(), coder)
            | beam.Map(_batch_summary)
        )
        assert_that(out, equal_to([(9, [5, 6], [2, 7, 3, 2, 3])]))


def test_buckets_grow_with_the_data_as_powers_of_two() -> None:
    assert buckets_for(0) == 16
    assert buckets_for(10 << 30) == 256
    assert buckets_for(1 << 40) == 32768  # 1 TB: past the 4,096 buckets (196 GB) of before
    # The bound: a bucket holds at most BUCKET_BYTES at any size up to MAX_BUCKETS of them,
    # here with the bucket size lowered to 1 KB and the data growing 2**25-fold (to 1 GB).
    for exponent in range(4, 29):
        for data in (1 << exponent, 3 << exponent, (1 << exponent) + 1):
            buckets = buckets_for(data, 1024)
            assert buckets & (buckets - 1) == 0 and -(-data // buckets) <= 1024, data


def _doc(i: int) -> dict[str, str]:
    return {"id": f"d{i:04d}", "text": f"text {i}", "source": "s", "meta": "{}"}


@pytest.mark.parametrize("order", ["forward", "reversed"])
def test_document_parts_are_the_same_bytes_through_files_or_group_by_key(
    tmp_path: Path, order: str
) -> None:
    rows = [_doc(i) for i in range(60)]
    if order == "reversed":
        rows.reverse()
    written = {}
    for name, shuffle in (("files", Shuffle(str(tmp_path / "spill"), 4)), ("gbk", Shuffle())):
        staging = tmp_path / name
        staging.mkdir()
        with TestPipeline(runner=LocalRunner()) as p:
            _ = p | beam.Create(rows) | WriteParquetParts(str(staging), 5, shuffle)
        written[name] = {f.name: f.read_bytes() for f in sorted(staging.iterdir())}
    names = [f"part-{i:05d}-of-00005.parquet" for i in range(5)]
    assert sorted(written["files"]) == names  # every part, even one no id hashes to
    assert written["files"] == written["gbk"]
    back = [pq.read_table(tmp_path / "files" / n).to_pylist() for n in names]
    assert sorted(r["id"] for part in back for r in part) == [f"d{i:04d}" for i in range(60)]
    for part in back:
        assert [r["id"] for r in part] == sorted(r["id"] for r in part)


def test_a_part_no_row_hashes_to_is_an_empty_file(tmp_path: Path) -> None:
    with TestPipeline(runner=LocalRunner()) as p:
        _ = p | beam.Create([_doc(1)]) | WriteParquetParts(str(tmp_path), 3, Shuffle())
    tables = [pq.read_table(f) for f in sorted(tmp_path.glob("part-*.parquet"))]
    assert [t.num_rows for t in tables].count(0) == 2 and sum(t.num_rows for t in tables) == 1
    assert all(t.schema.equals(DOCUMENT) for t in tables)


def test_integer_keys_fill_every_bucket_equally(tmp_path: Path) -> None:
    # Group, bucket and shard numbers from 0 up: key % buckets, where a hash would put 7
    # or more of 64 keys into the fullest of 16 buckets now and then (reading it whole).
    spill = shuffle_module._Spill(str(tmp_path), 16, VarIntCoder(), StrUtf8Coder())
    spill.start_bundle()
    for key in range(64):
        assert not list(spill.process((key, "v" * 100)))
    keys_in: dict[int, set[int]] = {}
    for windowed in spill.finish_bundle():
        bucket, (path, start, end) = windowed.value
        data = Path(path).read_bytes()[start:end]
        keys = {VarIntCoder().decode(k) for k, _ in shuffle_module._records(data)}
        keys_in.setdefault(bucket, set()).update(keys)
    assert keys_in == {b: {b, b + 16, b + 32, b + 48} for b in range(16)}
