import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from corpus.dealing import bucket_offsets, number_of_shards, place, sequence_key
from corpus.instances import Specials, pack_across_documents, pack_document, single_sequence

sentence = st.lists(st.integers(5, 999), min_size=0, max_size=40).map(
    lambda v: np.array(v, dtype=np.int64)
)
document = st.lists(sentence, min_size=1, max_size=8)


@given(document, st.integers(6, 30))
def test_packing_loses_no_token_and_respects_capacity(doc, capacity) -> None:
    chunks = pack_document(doc, capacity)
    flat = np.concatenate([np.concatenate(c) for c in chunks]) if chunks else np.zeros(0)
    assert flat.tolist() == np.concatenate(doc).tolist()
    assert all(sum(len(p) for p in c) <= capacity for c in chunks)
    sp = Specials(cls=2, sep=3)
    for c in chunks:
        seq = single_sequence(c, sp)
        assert seq[0] == 2 and seq[-1] == 3 and len(seq) <= capacity + 2


@given(st.lists(document, min_size=1, max_size=6), st.integers(6, 30))
def test_cross_document_packing_adds_only_separators(docs, capacity) -> None:
    tails = [c for d in docs for c in pack_document(d, capacity)[-1:]]
    packed = pack_across_documents(tails, capacity, doc_sep=3)
    content = [t for c in packed for p in c for t in p.tolist()]
    assert [t for t in content if t != 3] == [t for tail in tails for p in tail for t in p.tolist()]
    assert all(sum(len(p) for p in c) <= capacity for c in packed)


def test_dealing_balances_shards_and_keeps_ranks_unique() -> None:
    keys = sorted(sequence_key(7, f"doc{i}") for i in range(1003))
    counts: dict[int, int] = {}
    for k in keys:
        counts[k >> 52] = counts.get(k >> 52, 0) + 1
    offsets = bucket_offsets(counts)
    shards = number_of_shards(1003, None, 100)
    assert shards == 11
    sizes = [0] * shards
    seen = set()
    for i, k in enumerate(keys):
        b = k >> 52
        rank = offsets[b] + sum(1 for k2 in keys[:i] if k2 >> 52 == b)
        seen.add(rank)
        sizes[place(rank, shards)[0]] += 1
    assert seen == set(range(1003))
    assert max(sizes) - min(sizes) <= 1
    assert number_of_shards(5, 8, None) == 5 and number_of_shards(0, 8, None) == 0


@given(st.lists(sentence, min_size=0, max_size=30), st.data())
def test_sequence_batch_take_and_concat_keep_sequences(seqs, data) -> None:
    from corpus.instances import SequenceBatch

    keys = [sequence_key(1, f"s{i}") for i in range(len(seqs))]
    batch = SequenceBatch.build(keys, seqs, "uint16", segments=[3] * len(seqs))
    assert [s.tolist() for s in batch.sequences()] == [s.tolist() for s in seqs]
    index = np.array(data.draw(st.permutations(range(len(seqs)))), dtype=np.int64)
    taken = batch.take(index)
    assert [s.tolist() for s in taken.sequences()] == [seqs[i].tolist() for i in index]
    assert taken.keys.tolist() == [keys[i] for i in index]
    half = len(seqs) // 2
    both = SequenceBatch.concat(
        [batch.take(np.arange(half)), batch.take(np.arange(half, len(seqs)))]
    )
    assert [s.tolist() for s in both.sequences()] == [s.tolist() for s in seqs]


def test_key_order_and_bucket_bits() -> None:
    from corpus.dealing import bucket_bits_for, buckets_of, key_order

    keys = np.array([5, 3, 3, 9], dtype=np.uint64)
    # a collision is ordered by the tiebreak, not by arrival
    assert key_order(keys, lambda: [b"x", b"b", b"a", b"y"]).tolist() == [2, 1, 0, 3]
    assert bucket_bits_for(0) == 0 and bucket_bits_for(100 << 30) == 12
    big = np.array([1 << 63, (1 << 62) - 1], dtype=np.uint64)
    assert buckets_of(big, 1).tolist() == [1, 0] and buckets_of(big, 0).tolist() == [0, 0]
