import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from clozeworks.corpus.shards import ranges
from clozeworks.corpus.shards.dealing import bucket_offsets, number_of_shards, place
from clozeworks.corpus.shards.instances import (
    SequenceBatch,
    Specials,
    chunk_bounds,
    pack_sentences,
    pack_stream,
    single_sequences,
    stream_items,
)
from clozeworks.corpus.shards.keys import string_key
from clozeworks.corpus.shards.tokenize import TokenizedBatch

SP = Specials(cls=2, sep=3)
lengths = st.lists(st.integers(0, 40), min_size=0, max_size=8)  # a document's sentences


def _batch(docs: list[list[int]]) -> TokenizedBatch:
    """Documents of sentences of these lengths; token ids 5, 6, 7, ... in order."""
    flat = [n for d in docs for n in d]
    ids = np.arange(5, 5 + sum(flat), dtype=np.int64)
    per_doc = np.array([len(d) for d in docs], dtype=np.int64)
    return TokenizedBatch.from_lengths(ids, np.array(flat, dtype=np.int64), per_doc)


def _reference_pack(sentences: list[int], capacity: int) -> list[list[int]]:
    """Chunks as lists of piece lengths: greedy, pieces of long sentences first."""
    chunks: list[list[int]] = []
    current: list[int] = []
    for length in sentences:
        for start in range(0, length, capacity):
            piece = min(capacity, length - start)
            if sum(current) + piece > capacity and current:
                chunks.append(current)
                current = []
            current.append(piece)
    return chunks + ([current] if current else [])


@given(lengths, st.integers(6, 30))
def test_pack_sentences_is_greedy_and_loses_no_token(sentences, capacity) -> None:
    ends = pack_sentences(sentences, capacity)
    sizes = np.diff([0, *ends]).tolist()
    assert sum(sizes) == sum(sentences) and all(0 < s <= capacity for s in sizes)
    assert sizes == [sum(c) for c in _reference_pack(sentences, capacity)]


@given(st.lists(lengths, min_size=1, max_size=6), st.integers(6, 30))
def test_chunks_of_a_batch_hold_every_token_once_and_never_cross_a_document(docs, capacity) -> None:
    batch = _batch(docs)
    bounds = chunk_bounds(batch, capacity)
    assert bounds[0] == 0 and bounds[-1] == len(batch.ids)
    assert (np.diff(bounds) > 0).all() and (np.diff(bounds) <= capacity).all()
    doc_bounds = batch.token_bounds()
    assert set(doc_bounds.tolist()) <= set(bounds.tolist())  # no chunk crosses a document
    tokens, offsets = single_sequences(batch.ids, bounds[:-1], bounds[1:], SP)
    seqs = [tokens[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
    assert all(s[0] == 2 and s[-1] == 3 and len(s) <= capacity + 2 for s in seqs)
    assert np.concatenate([s[1:-1] for s in seqs] or [[]]).tolist() == batch.ids.tolist()


@given(st.lists(lengths, min_size=1, max_size=8), st.integers(6, 30))
def test_a_stream_packs_every_token_once_with_one_separator_between_documents(
    docs, capacity
) -> None:
    batch = _batch(docs)
    stream, starts, ends = pack_stream(batch, capacity, sep=3)
    blocks = [stream[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    assert all(0 < len(b) <= capacity for b in blocks)
    assert (starts[1:] >= ends[:-1]).all()  # in order, never overlapping
    assert [t for b in blocks for t in b.tolist() if t != 3] == batch.ids.tolist()
    with_tokens = sum(1 for d in docs if sum(d))
    assert (stream == 3).sum() == max(0, with_tokens - 1)
    # every token of the stream is in a block but separators of blocks not made
    missing = len(stream) - sum(len(b) for b in blocks)
    assert missing == sum(1 for a, b in zip(ends[:-1], starts[1:], strict=True) if b > a)
    gaps = zip(ends[:-1].tolist(), starts[1:].tolist(), strict=True)
    assert all(stream[a:b].tolist() == [3] for a, b in gaps if b > a)
    # greedy: a block ends only where the next item (a sentence piece or the separator)
    # would not fit
    sizes, _ = stream_items(batch, capacity)
    item_at = dict(zip(ranges.offsets(sizes)[:-1].tolist(), sizes.tolist(), strict=True))
    for k in range(len(blocks) - 1):
        assert len(blocks[k]) + item_at[int(ends[k])] > capacity


def test_dealing_balances_shards_and_keeps_ranks_unique() -> None:
    keys = sorted(string_key(7, f"doc{i}") for i in range(1003))
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


sentence = st.lists(st.integers(5, 999), min_size=0, max_size=40).map(
    lambda v: np.array(v, dtype=np.int64)
)


@given(st.lists(sentence, min_size=0, max_size=30), st.data())
def test_sequence_batch_take_and_concat_keep_sequences(seqs, data) -> None:
    keys = [string_key(1, f"s{i}") for i in range(len(seqs))]
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
    from clozeworks.corpus.shards.dealing import bucket_bits_for, buckets_of, key_order

    keys = np.array([5, 3, 3, 9], dtype=np.uint64)
    # a collision is ordered by the tiebreak, not by arrival
    assert key_order(keys, lambda: [b"x", b"b", b"a", b"y"]).tolist() == [2, 1, 0, 3]
    assert bucket_bits_for(0) == 0 and bucket_bits_for(100 << 30) == 12
    assert bucket_bits_for(1 << 40) == 16  # 1 TB: 65,536 buckets, past the old cap of 4,096
    # The bound: a bucket holds 1 to 2 times the bucket size (1 KB here) as the corpus
    # grows 2**23-fold (to 12 GB), up to 2**MAX_BUCKET_BITS buckets.
    for exponent in range(10, 33):
        for total in (1 << exponent, 3 << exponent, (1 << exponent) + 7):
            per_bucket = total / (1 << bucket_bits_for(total, 1024))
            assert 1024 <= per_bucket < 2048, total
    big = np.array([1 << 63, (1 << 62) - 1], dtype=np.uint64)
    assert buckets_of(big, 1).tolist() == [1, 0] and buckets_of(big, 0).tolist() == [0, 0]
