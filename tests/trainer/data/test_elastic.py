"""Resuming a loader on another world size (elastic): the rest of the epoch is what no rank
of the saved run read, so every sequence of the epoch is read exactly once."""

from __future__ import annotations

import json

import pytest

from clozeworks.schemas.errors import UsageError
from clozeworks.trainer.data.loader import ShardDataset
from tests.trainer.data.shardsets import make_shards, sequence_ids

SIZES = [57, 57, 56, 56]
BATCH = 4


@pytest.fixture(scope="module")
def shards(tmp_path_factory, tokenizer_dir):
    directory = tmp_path_factory.mktemp("elastic")
    make_shards(directory, SIZES, tokenizer_dir, block_size=8)
    return directory


def loader(shards, rank, world, batch=BATCH, **kw):
    ds = ShardDataset(
        shards, batch_size=batch, seed=6, rank=rank, world_size=world, shuffle_buffer=96, **kw
    )
    return ds.loader()


def take(shards, world, count, state=None, batch=BATCH, **kw):
    """Every rank's first `count` batches of the epoch (all if None); ids and the state."""
    seen, states = [], []
    for rank in range(world):
        lo = loader(shards, rank, world, batch, **kw)
        if state is not None:
            lo.load_state_dict(json.loads(json.dumps(state)))
        for i, b in enumerate(lo):
            seen.extend(sequence_ids(b))
            if count is not None and i + 1 == count:
                break
        states.append(lo.state_dict())
    assert all(s == states[0] for s in states)  # the state is the same on every rank
    return seen, states[0]


@pytest.mark.parametrize(("before", "after"), [(2, 1), (1, 2), (2, 3), (3, 2)])
def test_the_rest_of_the_epoch_on_another_world_size_reads_each_sequence_once(
    shards, before, after
) -> None:
    first, state = take(shards, before, 5)
    rest, end = take(shards, after, None, state)
    seen = first + rest
    assert len(seen) == len(set(seen)), "a sequence was read twice"
    # Only what does not fill the new layout's last batches sits out.
    assert sum(SIZES) - len(seen) < after * BATCH + after
    assert end["epoch"] == 1 and end["batches"] == 0 and end["history"] == []


def test_two_elastic_resumes_in_one_epoch_and_a_new_batch_size(shards) -> None:
    a, state = take(shards, 2, 3)
    b, state = take(shards, 3, 2, state)
    assert len(state["history"]) == 1
    c, _ = take(shards, 1, None, state, batch=5)
    seen = a + b + c
    assert len(seen) == len(set(seen)) and sum(SIZES) - len(seen) < 5


def test_the_next_epoch_is_whole_again(shards) -> None:
    _, state = take(shards, 2, 4)
    lo = loader(shards, 0, 1)
    lo.load_state_dict(state)
    list(lo)  # the rest of epoch 0
    second = [i for b in lo for i in sequence_ids(b)]
    assert len(second) == sum(SIZES) // BATCH * BATCH


def test_bucketed_or_other_shards_still_refuse_mid_epoch(shards, tmp_path, tokenizer_dir) -> None:
    _, state = take(shards, 2, 3, length_bucketing=True)
    with pytest.raises(UsageError, match="cannot resume"):
        loader(shards, 0, 1, length_bucketing=True).load_state_dict(state)
    _, state = take(shards, 2, 3)
    other = tmp_path / "other"
    make_shards(other, [50, 50], tokenizer_dir, block_size=8)
    with pytest.raises(UsageError, match="cannot resume"):
        loader(other, 0, 1).load_state_dict(state)
