"""Damaged shards: caught, named by shard and byte offset, or skipped with one warning
and a counter while every rank keeps its number of batches."""

import shutil
import tarfile
import warnings

import pytest
import torch

from clozeworks.corpus.shards.blocks import ShardFormatError
from clozeworks.trainer.data.loader import ShardDataset, ShardSkippedWarning
from tests.trainer.data.shardsets import make_shards, sequence_ids

SIZES = [40, 40, 40, 40]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, tokenizer_dir):
    directory = tmp_path_factory.mktemp("pristine")
    make_shards(directory, SIZES, tokenizer_dir, block_size=8)
    return directory


def damaged(tmp_path, pristine, how):
    copy = tmp_path / "shards"
    shutil.copytree(pristine, copy)
    path = copy / "shard-000002.tar"
    data = bytearray(path.read_bytes())
    if how == "flip":  # a byte of some member's data: only the checksum sees it
        data[len(data) // 2 + 700] ^= 0x10
    elif how == "header":  # the name in a member header: tar's own checksum fails
        with tarfile.open(path) as tar:
            header = tar.getmembers()[5].offset
        data[header + 3] ^= 0x01
    elif how == "truncate":
        data = data[: len(data) // 2]
    path.write_bytes(bytes(data))
    return copy


def dataset(path, **kw):
    return ShardDataset(path, batch_size=4, seed=2, shuffle_buffer=64, **kw)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_flipped_byte_is_caught_with_verify(tmp_path, pristine, workers) -> None:
    path = damaged(tmp_path, pristine, "flip")
    with pytest.raises(ShardFormatError, match=r"shard-000002\.tar: bytes 0-\d+: sha256") as err:
        list(dataset(path, verify=True).loader(num_workers=workers))
    assert err.value.shard == "shard-000002.tar"


@pytest.mark.parametrize("how", ["header", "truncate"])
def test_structural_damage_is_named_without_verify(tmp_path, pristine, how) -> None:
    path = damaged(tmp_path, pristine, how)
    with pytest.raises(ShardFormatError, match=r"shard-000002\.tar: .*byte \d+"):
        list(dataset(path).loader())


@pytest.mark.parametrize("how", ["flip", "header", "truncate"])
def test_skip_warns_once_counts_and_keeps_the_batch_count(tmp_path, pristine, how) -> None:
    path = damaged(tmp_path, pristine, how)
    ds = dataset(path, verify=how == "flip", on_error="skip")
    loader = ds.loader(num_workers=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        epochs = [list(loader), list(loader)]
    skipped = [w for w in caught if issubclass(w.category, ShardSkippedWarning)]
    assert len(skipped) == 1 and "shard-000002.tar" in str(skipped[0].message)
    assert [len(e) for e in epochs] == [ds.batches_per_epoch()] * 2
    assert loader.counters["damaged_shards"] == 1
    assert loader.counters["substituted_sequences"] > 0
    clean = dataset(pristine)
    assert len(list(clean.loader())) == ds.batches_per_epoch()
    # shard 2 holds sequences 80..119: a wrong checksum or size rejects all of it; a broken
    # header hides what follows it, and the blocks before it are still read
    hidden = set(range(80, 120)) - {i for b in epochs[0] for i in sequence_ids(b)}
    assert len(hidden) == 40 if how != "header" else 0 < len(hidden) < 40


def test_skip_resumes_exactly(tmp_path, pristine) -> None:
    path = damaged(tmp_path, pristine, "truncate")
    ds = dataset(path, on_error="skip")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShardSkippedWarning)
        reference = list(ds.loader())
        first = ds.loader()
        for n, _ in enumerate(first, 1):
            if n == 13:
                break
        resumed = dataset(path, on_error="skip").loader(num_workers=2)
        resumed.load_state_dict(first.state_dict())
        rest = list(resumed)
    assert len(rest) == len(reference) - 13
    for a, b in zip(reference[13:], rest, strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_skip_gives_up_when_every_shard_is_damaged(tmp_path, pristine) -> None:
    copy = tmp_path / "shards"
    shutil.copytree(pristine, copy)
    for path in copy.glob("shard-*.tar"):
        path.write_bytes(path.read_bytes()[:1000])
    with (
        warnings.catch_warnings(),
        pytest.raises(ShardFormatError, match="damaged: nothing left to read"),
    ):
        warnings.simplefilter("ignore", ShardSkippedWarning)
        list(dataset(copy, on_error="skip").loader())
