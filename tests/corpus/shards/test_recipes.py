"""How each shard mode makes sequences from batches of documents, without Beam: the
functions a pipeline's steps call, run directly."""

import random

import numpy as np
import pytest
from tokenizers import Tokenizer

from clozeworks.corpus.shards import recipes
from clozeworks.corpus.shards.instances import SequenceBatch, Specials
from clozeworks.corpus.shards.settings import ShardSettings
from clozeworks.corpus.shards.tokenize import DocumentEncoder
from clozeworks.corpus.text.demo import iter_docstrings
from clozeworks.corpus.vocab.train import load_tokenizer


@pytest.fixture(scope="module")
def encoder(tokenizer_dir) -> tuple[DocumentEncoder, Specials]:
    info = load_tokenizer(tokenizer_dir)
    specials = Specials(cls=info.special_ids["cls"], sep=info.special_ids["sep"])
    return DocumentEncoder(Tokenizer.from_str(info.tokenizer.to_str())), specials


@pytest.fixture(scope="module")
def documents() -> tuple[list[str], list[str]]:
    docs = [d for _, d in zip(range(300), iter_docstrings(min_chars=200), strict=False)]
    return [d["id"] for d in docs], [d["text"] for d in docs]


def _recipe(specials: Specials, **settings) -> recipes.Recipe:
    return recipes.Recipe(ShardSettings(**settings), specials, "uint16", bucket_bits=2)


def _all(bucketed) -> SequenceBatch:
    assert all(len(batch) for _, batch in bucketed)
    return SequenceBatch.concat([batch for _, batch in bucketed])


def test_text_slices_cover_every_document_in_order() -> None:
    texts = [f"{'x' * (i % 50)}{i}" for i in range(1000)]
    ids = [str(i) for i in range(1000)]
    slices = list(recipes.text_slices(ids, texts, chars=400))
    assert [i for s, _ in slices for i in s] == ids
    assert [t for _, s in slices for t in s] == texts
    assert all(sum(map(len, t)) <= 400 + 60 for _, t in slices[:-1])


@pytest.mark.parametrize("mode", ["doc-sentences", "single", "sop"])
def test_modes_of_one_document_make_their_sequences_at_once(encoder, documents, mode) -> None:
    enc, specials = encoder
    r = _recipe(specials, mode=mode, max_seq_len=64, dupe_factor=1)
    made = recipes.from_documents(r, enc, *documents)
    assert made.parts == [] and made.counts["shard.documents"] == len(documents[0])
    batch = _all(made.sequences)
    for bucket, part in made.sequences:  # each batch is in the bucket of its keys
        assert set(np.unique(recipes.dealing.buckets_of(part.keys, 2)).tolist()) == {bucket}
    for i in range(len(batch)):
        seq = batch.sequence(i)
        assert len(seq) <= 64 and seq[0] == specials.cls and seq[-1] == specials.sep
    if mode == "sop":
        assert set(batch.labels.tolist()) == {0, 1}
        assert made.counts["pairs.sequences"] == len(batch)


def test_dupe_factor_copies_have_copy_numbers_and_keys_of_their_own(encoder, documents) -> None:
    enc, specials = encoder
    one = _all(recipes.from_documents(_recipe(specials, mode="single"), enc, *documents).sequences)
    three = _all(
        recipes.from_documents(
            _recipe(specials, mode="single", premask="token", dupe_factor=3), enc, *documents
        ).sequences
    )
    assert len(three) == 3 * len(one) and sorted(set(three.copies.tolist())) == [0, 1, 2]
    assert len(set(three.keys.tolist())) == len(three)


@pytest.mark.parametrize("mode", ["nsp", "sso", "full-sentences"])
def test_grouped_modes_make_the_same_sequences_however_the_parts_arrive(
    encoder, documents, mode
) -> None:
    enc, specials = encoder
    ids, texts = documents
    r = _recipe(specials, mode=mode, max_seq_len=64)
    # three batches, as three workers would tokenize them
    made = [
        recipes.from_documents(r, enc, ids[a:b], texts[a:b])
        for a, b in ((0, 90), (90, 200), (200, 300))
    ]
    assert all(m.sequences == [] for m in made)
    parts = [part for m in made for _, part in m.parts]
    assert sum(len(p.ids) for p in parts) <= len(ids)

    def built(order):
        bucketed, counts = recipes.from_group(r, 0, [parts[i] for i in order], "test")
        batch = _all(bucketed)
        return sorted(s.tobytes() for s in batch.sequences()), counts

    first = built(range(len(parts)))
    shuffled = list(range(len(parts)))
    random.Random(3).shuffle(shuffled)
    assert built(shuffled) == first
    assert len(first[0]) > 50
