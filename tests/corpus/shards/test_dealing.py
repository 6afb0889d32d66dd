"""Dealing sequences to shards, without Beam: a global shuffle from per-bucket counts."""

import numpy as np

from clozeworks.corpus.shards import dealing
from clozeworks.corpus.shards.instances import SequenceBatch


def _batch(keys: list[int]) -> SequenceBatch:
    return SequenceBatch.build(keys, [np.array([k % 1000, 7]) for k in keys], "uint16")


def _deal(keys: list[int], bits: int, shards: int, split: int = 1) -> dict[int, list]:
    """Every bucket dealt as one worker would, its batches arriving in `split` pieces in
    reverse order: {shard: [(position, key)]}."""
    buckets = dealing.buckets_of(np.array(keys, dtype=np.uint64), bits)
    counts = {int(b): int((buckets == b).sum()) for b in set(buckets.tolist())}
    offsets = dealing.bucket_offsets(counts)
    out: dict[int, list] = {}
    for bucket in counts:
        mine = [k for k, b in zip(keys, buckets.tolist(), strict=True) if b == bucket]
        pieces = [_batch(mine[i::split]) for i in range(split)][::-1]
        batch = SequenceBatch.concat([p for p in pieces if len(p)])
        for shard, positions, part in dealing.deal_bucket(batch, offsets[bucket], shards):
            placed = zip(positions.tolist(), part.keys.tolist(), strict=True)
            out.setdefault(shard, []).extend(placed)
    return out


def test_a_deal_is_balanced_complete_and_ordered_by_key() -> None:
    rng = np.random.default_rng(0)
    keys = [int(k) for k in rng.integers(0, 2**63, size=1003, dtype=np.uint64) * 2 + 1]
    dealt = _deal(keys, bits=3, shards=7)
    sizes = sorted(len(v) for v in dealt.values())
    assert len(dealt) == 7 and sizes[-1] - sizes[0] <= 1 and sum(sizes) == len(keys)
    for placed in dealt.values():
        assert sorted(p for p, _ in placed) == list(range(len(placed)))
    # rank r (in the order of all keys) is shard r mod 7 at position r div 7
    ranked = sorted(keys)
    for shard, placed in dealt.items():
        for position, key in placed:
            assert ranked[position * 7 + shard] == key


def test_a_deal_does_not_depend_on_how_batches_arrive_or_on_bucket_bits() -> None:
    rng = np.random.default_rng(1)
    keys = [int(k) for k in rng.integers(0, 2**64 - 1, size=500, dtype=np.uint64)]

    def normal(dealt):
        return {s: sorted(v) for s, v in dealt.items()}

    one = normal(_deal(keys, bits=0, shards=4))
    assert normal(_deal(keys, bits=4, shards=4, split=3)) == one
    assert normal(_deal(keys, bits=12, shards=4, split=2)) == one


def test_place_works_on_one_rank_and_on_arrays() -> None:
    assert dealing.place(10, 4) == (2, 2)
    shard, position = dealing.place(np.arange(6), 4)
    assert shard.tolist() == [0, 1, 2, 3, 0, 1] and position.tolist() == [0, 0, 0, 0, 1, 1]
