"""Static masking as the shard writer does it, on real text and a real tokenizer.

Tolerances are the issue's: masked share of maskable tokens 15% +- 0.5 points, the
80/10/10 split +- 1.5 points. About 2,000 sequences of 128 tokens give ~37k masked
positions (standard error of a 10% share: 0.16 point).
"""

import functools
from itertools import islice
from pathlib import Path

import numpy as np
import pytest

from clozeworks.corpus.shards.instances import (
    Specials,
    chunk_bounds,
    content_capacity,
    single_sequences,
)
from clozeworks.corpus.shards.masking import MaskTables
from clozeworks.corpus.shards.premask import StaticMasker
from clozeworks.corpus.shards.settings import default_max_predictions
from clozeworks.corpus.shards.tokenize import DocumentEncoder
from clozeworks.corpus.text.demo import iter_docstrings
from clozeworks.corpus.vocab.train import load_tokenizer
from clozeworks.schemas.masking import MaskingSettings
from tests.corpus.shards.reference_masking import spanbert_reference


@pytest.fixture(scope="module")
def vocab(tokenizer_dir):
    info = load_tokenizer(tokenizer_dir)
    tables = MaskTables.build(
        info.vocab_size, info.all_special_ids, info.word_start_table(), info.special_ids["mask"]
    )
    return info, tables


@functools.cache
def _documents(tokenizer_dir):
    info = load_tokenizer(tokenizer_dir)
    texts = [d["text"] for d in islice(iter_docstrings(), 2000)]
    return DocumentEncoder(info.tokenizer).encode(texts)


def sequences(info, max_seq_len: int, n: int) -> list[np.ndarray]:
    sp = Specials(cls=info.special_ids["cls"], sep=info.special_ids["sep"])
    batch = _documents(str(Path(info.path).parent))
    bounds = chunk_bounds(batch, content_capacity(max_seq_len))[: n + 1]
    tokens, offsets = single_sequences(batch.ids.astype(np.int64), bounds[:-1], bounds[1:], sp)
    return [tokens[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]


def masked(info, tables, kind: str, max_seq_len: int = 128, n: int = 2000, copy: int = 0):
    seqs = sequences(info, max_seq_len, n)
    cap = default_max_predictions(max_seq_len)
    settings = MaskingSettings(kind=kind, max_predictions=cap)
    masker = StaticMasker(tables, settings, seed=11, pad_id=info.special_ids["pad"])
    keys = [(i * 0x9E3779B97F4A7C15) % (1 << 64) for i in range(len(seqs))]
    return seqs, masker.mask(seqs, keys, [copy] * len(seqs))


@pytest.mark.parametrize("kind", ["token", "wwm", "span", "ngram"])
def test_share_split_and_specials(vocab, kind: str) -> None:
    info, tables = vocab
    seqs, out = masked(info, tables, kind)
    special = tables.special.numpy()
    mask_id = info.special_ids["mask"]
    maskable = sum(int((~special[s]).sum()) for s in seqs)
    chosen = sum(len(m.positions) for m in out)
    assert abs(chosen / maskable - 0.15) <= 0.005, chosen / maskable
    # Span draws 80/10/10 once per span: ~4k spans here, not ~37k tokens, so one copy has a
    # standard error of ~0.6 point on the 80% share. Four independently masked copies bring
    # it to ~0.3, well inside the 1.5 points.
    copies = [(seqs, out)]
    if kind == "span":
        copies += [masked(info, tables, kind, copy=c) for c in (1, 2, 3)]
    actions = np.zeros(3)
    for seq, m in ((s, m) for group, outs in copies for s, m in zip(group, outs, strict=True)):
        assert len(m.tokens) == len(seq)
        assert len(m.positions) <= default_max_predictions(128)
        assert not special[seq[m.positions]].any(), "a special token was chosen"
        assert np.array_equal(m.labels, seq[m.positions])
        untouched = np.setdiff1d(np.arange(len(seq)), m.positions)
        assert np.array_equal(m.tokens[untouched], seq[untouched])
        got = m.tokens[m.positions]
        is_mask, is_kept = got == mask_id, got == m.labels
        is_random = ~is_mask & ~is_kept
        assert not special[got[is_random]].any(), "a random replacement was a special token"
        actions += [is_mask.sum(), is_random.sum(), is_kept.sum()]
    split = actions / actions.sum()
    assert np.all(np.abs(split - [0.8, 0.1, 0.1]) <= 0.015), split


def word_ids(seq: np.ndarray, tables) -> np.ndarray:
    special = tables.special.numpy()[seq]
    # As corpus/shards/masking.py: a piece right after a special token starts a word (a chunk
    # may begin mid-word, with a "##" piece after [CLS]).
    after_special = np.concatenate([[True], special[:-1]])
    starts = tables.word_start.numpy()[seq] | special | after_special
    return np.cumsum(starts)


def test_whole_words_are_masked_whole(vocab) -> None:
    info, tables = vocab
    seqs, out = masked(info, tables, "wwm", n=500)
    pieces = 0
    for seq, m in zip(seqs, out, strict=True):
        words = word_ids(seq, tables)
        hit = set(words[m.positions].tolist())
        for w in hit:
            members = np.flatnonzero(words == w)
            pieces += len(members) > 1
            assert set(members.tolist()) <= set(m.positions.tolist()), "a word was cut"
    assert pieces > 50  # words of several pieces were among those masked


def span_runs(seqs, positions, tables) -> list[int]:
    """Words in each run of consecutive masked words (touching spans count as one)."""
    runs = []
    for seq, pos in zip(seqs, positions, strict=True):
        words = word_ids(seq, tables)
        hit = np.unique(words[pos])
        runs.extend(len(r) for r in np.split(hit, np.flatnonzero(np.diff(hit) != 1) + 1) if len(r))
    return runs


def test_span_runs_match_spanbert_on_real_text(vocab) -> None:
    """SpanBERT's own loop (tests/corpus/shards/test_masking_reference.py) on the same
    512-token sequences of stdlib docstrings: about 6,000 runs a side, so the standard
    error of the difference in mean run length is about 0.07 words; tolerance 0.25."""
    info, tables = vocab
    seqs, out = masked(info, tables, "span", max_seq_len=512, n=400)
    word_start = tables.word_start.numpy()
    rng = np.random.default_rng(5)
    reference = [
        np.array(sorted(i + 1 for i in spanbert_reference(list(s[1:-1]), word_start, rng)))
        for s in seqs
    ]
    ours = np.mean(span_runs(seqs, [m.positions for m in out], tables))
    theirs = np.mean(span_runs(seqs, reference, tables))
    assert abs(ours - theirs) < 0.25, (ours, theirs)


def test_copies_are_masked_independently_and_reproducibly(vocab) -> None:
    info, tables = vocab
    _, first = masked(info, tables, "token", n=200, copy=0)
    _, again = masked(info, tables, "token", n=200, copy=0)
    _, second = masked(info, tables, "token", n=200, copy=1)
    same = [np.array_equal(a.positions, b.positions) for a, b in zip(first, again, strict=True)]
    differ = [np.array_equal(a.positions, b.positions) for a, b in zip(first, second, strict=True)]
    assert all(same) and sum(differ) < 5
