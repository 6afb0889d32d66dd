"""SpanBERT's spans and ALBERT's n-grams against their reference code, on the same rows.

`spanbert_reference` is `PairWithSpanMaskingScheme.mask` from facebookresearch/SpanBERT
(pretraining/fairseq/data/masking.py) and `albert_reference` the selection loop of
`create_masked_lm_predictions` from google-research/albert (create_pretraining_data.py),
kept line for line on lists of word-start flags (what they read of a token), with numpy's
generator for their random draws. Ours runs on the same rows with `budget="reference"`,
so the two differ only in where their random numbers come from.

Compared, as the issue measured them: the contiguous masked runs (SpanBERT merges touching
spans into one, `merge_intervals`) in words, their mean and the share of long ones, and
the masked share. Rows: 3,000 of 64-128 tokens (two segments, pieces start a word with
probability 0.7 as in WordPiece on English). With about 9,000 SpanBERT runs and 17,000
ALBERT runs a side, the standard error of a difference in mean run length is about 0.05
words (SpanBERT) and 0.015 (ALBERT), in a share of runs about 0.5 points: tolerances are
about three of them. The masking before this file existed (consecutive groups of words
drawn in a random order) gave 4.31 / 1.84 words against the reference's 3.92 / 1.71.
"""

import numpy as np
import pytest
import torch

from clozeworks.corpus.shards.counter_rng import sequence_keys
from clozeworks.corpus.shards.masking import MaskTables, mask_tokens, pad_batch
from clozeworks.schemas.masking import MaskingSettings
from tests.corpus.shards.reference_masking import (
    albert_reference,
    bert_reference,
    run_words,
    spanbert_reference,
)

VOCAB = 2000
SPECIAL = [0, 1, 2, 3, 4]  # pad unk cls sep mask
CLS, SEP, MASK_ID = 2, 3, 4


def make_rows(pairs, n=3000, seed=0):
    """[CLS] A [SEP] B [SEP] rows (pairs) or [CLS] A [SEP]; every segment starts with a
    word-start piece (ALBERT would join a continuation piece after [SEP] to the word
    before it, where we start a word)."""
    rng = np.random.default_rng(seed)
    word_start = rng.random(VOCAB) < 0.7
    starts = np.flatnonzero(word_start[5:]) + 5
    rows = []
    for _ in range(n):
        length = int(rng.integers(64, 129))
        a = int(rng.integers(1, length - 4)) if pairs else length - 2
        segments = []
        for size in (a, length - 3 - a) if pairs else (a,):
            body = rng.choice(np.arange(5, VOCAB), size)
            body[0] = rng.choice(starts)
            segments.append(body)
        row = [CLS]
        for body in segments:
            row += [*body.tolist(), SEP]
        rows.append(row)
    return rows, word_start


def ours(rows, word_start, settings):
    ids, attention = pad_batch([torch.tensor(r) for r in rows], pad_id=0)
    tables = MaskTables.build(VOCAB, SPECIAL, word_start.tolist(), MASK_ID)
    r = mask_tokens(ids, attention, sequence_keys(7, 0, torch.arange(len(rows))), tables, settings)
    return [set(np.flatnonzero(m).tolist()) for m in r.masked.numpy()]


def summary(rows, masks, is_start):
    runs = [w for row, m in zip(rows, masks, strict=True) for w in run_words(row, m, is_start)]
    runs_arr = np.array(runs, dtype=np.float64)
    maskable = sum(sum(t not in (CLS, SEP) for t in r) for r in rows)
    return {
        "runs": len(runs),
        "mean": runs_arr.mean(),
        "ge4": (runs_arr >= 4).mean(),
        "ge10": (runs_arr >= 10).mean(),
        "share": sum(len(m) for m in masks) / maskable,
    }


def test_spanbert_spans_match_the_reference() -> None:
    # SpanBERT trains on single segments: its block is what lies between [CLS] and [SEP].
    rows, word_start = make_rows(pairs=False)
    rng = np.random.default_rng(1)
    ref_masks = [{i + 1 for i in spanbert_reference(r[1:-1], word_start, rng)} for r in rows]
    ref = summary(rows, ref_masks, word_start)
    settings = MaskingSettings(kind="span", budget="reference")
    got = summary(rows, ours(rows, word_start, settings), word_start)
    print("spanbert reference", ref, "ours", got)
    assert abs(got["mean"] - ref["mean"]) < 0.15, (got, ref)
    assert abs(got["ge4"] - ref["ge4"]) < 0.015, (got, ref)
    assert abs(got["ge10"] - ref["ge10"]) < 0.008, (got, ref)
    assert abs(got["share"] - ref["share"]) < 0.001, (got, ref)


def test_albert_ngrams_match_the_reference() -> None:
    rows, word_start = make_rows(pairs=True)
    rng = np.random.default_rng(2)
    ref_masks = [albert_reference(row, word_start, rng) for row in rows]
    ref = summary(rows, ref_masks, word_start)
    settings = MaskingSettings(kind="ngram", budget="reference", max_predictions=20)
    got = summary(rows, ours(rows, word_start, settings), word_start)
    print("albert reference", ref, "ours", got)
    assert abs(got["mean"] - ref["mean"]) < 0.05, (got, ref)
    assert abs(got["ge4"] - ref["ge4"]) < 0.008, (got, ref)
    assert abs(got["share"] - ref["share"]) < 0.002, (got, ref)


@pytest.mark.parametrize("kind", ["token", "wwm"])
def test_bert_masking_matches_the_reference(kind: str) -> None:
    """BERT's create_masked_lm_predictions (max_predictions 20, round(0.15 x all tokens)):
    the same share, the same number of predictions per row (it skips a word that would
    cross the budget and takes later ones, so most rows get exactly the budget), the same
    share of masked words of several pieces. 3,000 rows: standard errors about 0.02 of a
    prediction per row and 0.5 points in a share."""
    rows, word_start = make_rows(pairs=True)
    rng = np.random.default_rng(3)
    whole = kind == "wwm"
    ref = [bert_reference(r, word_start, rng, whole_word=whole) for r in rows]
    settings = MaskingSettings(kind=kind, budget="reference", max_predictions=20)
    got = ours(rows, word_start, settings)

    def per_row(masks):
        return np.array([len(m) for m in masks], dtype=np.float64)

    def pieces(masks):  # masked words of several pieces, per masked word start
        starts = multi = 0
        for row, m in zip(rows, masks, strict=True):
            for i in m:
                if word_start[row[i]] or i - 1 not in m:
                    starts += 1
                    multi += i + 1 < len(row) and i + 1 in m and not word_start[row[i + 1]]
        return multi / starts

    assert abs(per_row(got).mean() - per_row(ref).mean()) < 0.08
    budgets = [min(20, max(1, round(len(r) * 0.15))) for r in rows]
    exact_ref = np.mean(per_row(ref) == budgets)
    exact_got = np.mean(per_row(got) == budgets)
    assert abs(exact_got - exact_ref) < 0.02, (exact_got, exact_ref)
    assert abs(pieces(got) - pieces(ref)) < 0.02, (pieces(got), pieces(ref))
