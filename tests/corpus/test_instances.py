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
