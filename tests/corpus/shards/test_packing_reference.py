"""RoBERTa's packing against fairseq's own: `_get_slice_indices_fast` of
fairseq/data/token_block_utils_fast.pyx (what `TokenBlockDataset` cuts blocks with), kept
line for line below; `complete` is FULL-SENTENCES, `complete_doc` DOC-SENTENCES.

fairseq packs binarized lines: each sentence ends in an eos, and an empty line (an eos
alone, `document_sep_len` = 1) separates documents. Our sequences put nothing after a
sentence and, in FULL-SENTENCES, one separator between documents, so the reference runs on
these sizes: a sentence is its tokens and the separator 1 token (`complete`); in
`complete_doc` no token is between a document's blocks, so the separator marker has size 0
and fairseq's `curr_size > 1` ("more than an eos") is `> 0`.

Where the two differ on purpose (`--packing-rules`, docs/design.md): fairseq makes a
sentence longer than a block one over-long block, which training then refuses; we cut it
into pieces. On input without such sentences, and on the pieces where there are, the
blocks must be the same, boundary for boundary.
"""

import numpy as np
import pytest

from clozeworks.corpus.shards.instances import chunk_bounds, pack_stream
from clozeworks.corpus.shards.tokenize import TokenizedBatch


def fairseq_slices(sizes, break_mode, block_size, document_sep_len, keep_above=1):
    """fairseq's `_get_slice_indices_fast` for "complete" and "complete_doc"."""
    tok_idx = sz_idx = curr_size = 0
    slice_indices = []
    if break_mode == "complete":
        while sz_idx < len(sizes):
            if curr_size + sizes[sz_idx] <= block_size or curr_size == 0:
                curr_size += sizes[sz_idx]
                sz_idx += 1
            else:
                slice_indices.append((tok_idx, tok_idx + curr_size))
                tok_idx += curr_size
                curr_size = 0
        if curr_size > 0:
            slice_indices.append((tok_idx, tok_idx + curr_size))
    elif break_mode == "complete_doc":
        while sz_idx < len(sizes):
            if (curr_size + sizes[sz_idx] <= block_size or curr_size == 0) and sizes[
                sz_idx
            ] != document_sep_len:  # an empty sentence ends a document
                curr_size += sizes[sz_idx]
                sz_idx += 1
            else:
                if curr_size > keep_above:  # only keep non-empty documents
                    slice_indices.append((tok_idx, tok_idx + curr_size))
                tok_idx += curr_size
                curr_size = 0
                if sizes[sz_idx] == document_sep_len:
                    tok_idx += sizes[sz_idx]
                    sz_idx += 1
        if curr_size > keep_above:
            slice_indices.append((tok_idx, tok_idx + curr_size))
    return slice_indices


def _documents(rng, n, longest, empty_share=0.02):
    """Documents of 1-60 sentences of 1..longest tokens; a few without any."""
    return [
        []
        if rng.random() < empty_share
        else rng.integers(1, longest + 1, size=int(rng.integers(1, 61))).tolist()
        for _ in range(n)
    ]


def _batch(docs):
    flat = [n for d in docs for n in d]
    ids = np.arange(5, 5 + sum(flat), dtype=np.int64)
    per_doc = np.array([len(d) for d in docs], dtype=np.int64)
    return TokenizedBatch.from_lengths(ids, np.array(flat, dtype=np.int64), per_doc)


def _pieces(sentence, capacity):
    """Our cut of a sentence: capacity-long pieces, the rest last."""
    return [min(capacity, sentence - s) for s in range(0, sentence, capacity)]


@pytest.mark.parametrize("capacity", [126, 510])
def test_full_sentences_are_fairseqs_complete_blocks(capacity) -> None:
    docs = _documents(np.random.default_rng(capacity), 3000, longest=60)
    sizes = []
    for doc in (d for d in docs if d):
        sizes += [1] if sizes else []  # the separator between documents
        sizes += doc
    reference = fairseq_slices(sizes, "complete", capacity, document_sep_len=1)
    _, starts, ends = pack_stream(_batch(docs), capacity, sep=3)
    assert list(zip(starts.tolist(), ends.tolist(), strict=True)) == reference


def test_over_long_sentences_are_cut_where_fairseq_makes_one_block_of_them() -> None:
    capacity = 126
    docs = _documents(np.random.default_rng(7), 2000, longest=300)
    sizes, separators = [], set()
    for doc in (d for d in docs if d):
        if sizes:
            separators.add(len(sizes))
            sizes.append(1)
        sizes += [p for s in doc for p in _pieces(s, capacity)]
    reference = fairseq_slices(sizes, "complete", capacity, document_sep_len=1)
    # a block holding nothing but the separator (before a full piece) is not made
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    lone = {int(offsets[i]) for i in separators}
    expected = [(a, b) for a, b in reference if not (b - a == 1 and a in lone)]
    assert len(expected) < len(reference)  # the case happens in this input
    _, starts, ends = pack_stream(_batch(docs), capacity, sep=3)
    assert list(zip(starts.tolist(), ends.tolist(), strict=True)) == expected

    # --packing-rules reference: fairseq's blocks, the over-long ones left out
    whole, lone = [], set()
    for doc in (d for d in docs if d):
        if whole:
            lone.add(sum(whole))
            whole.append(1)
        whole += doc
    reference = fairseq_slices(whole, "complete", capacity, document_sep_len=1)
    long = [(a, b) for a, b in reference if b - a > capacity]
    assert len(long) == sum(s > capacity for d in docs for s in d)
    _, starts, ends = pack_stream(_batch(docs), capacity, sep=3, cut=False)
    kept = [(a, b) for a, b in reference if b - a <= capacity and not (b - a == 1 and a in lone)]
    assert list(zip(starts.tolist(), ends.tolist(), strict=True)) == kept


@pytest.mark.parametrize("longest", [100, 300])
def test_doc_sentences_are_fairseqs_complete_doc_blocks(longest) -> None:
    capacity = 126
    docs = _documents(np.random.default_rng(longest), 3000, longest=longest)
    for cut in (True, False):
        sizes = []
        for doc in docs:
            sizes += [p for s in doc for p in (_pieces(s, capacity) if cut else [s])] + [0]
        reference = fairseq_slices(sizes, "complete_doc", capacity, 0, keep_above=0)
        bounds = chunk_bounds(_batch(docs), capacity, cut)
        ours = list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))
        assert ours == reference
        assert cut or any(b - a > capacity for a, b in ours) == (longest > capacity)
