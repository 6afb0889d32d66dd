"""BART's noise against fairseq's own code (tests/trainer/data/fairseq_denoising.py, copied
unchanged) on the same rows: the two draw from different generators, so what must agree
is every statistic of the noise, within sampling error.

Tolerance: the difference of two means of per-row values (or of two shares) is within 4
standard errors of that difference (sqrt(var_a / n_a + var_b / n_b)); a true difference
of that size would be a bug, a false alarm has probability about 6e-5 per comparison.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from clozeworks.corpus.shards.masking import IGNORE_INDEX, MaskTables
from clozeworks.trainer.data.denoising import (
    DECODER_INPUTS,
    DENOISE_STATS,
    Denoising,
    DenoisingSettings,
    span_distribution,
)
from tests.trainer.data.fairseq_denoising import DenoisingDataset, Dictionary

PAD, UNK, CLS, SEP, MASK, STOP = 0, 1, 2, 3, 4, 5
V = 20_000
# Ids 6 .. 9,999 start a word, 10,000 .. 19,999 continue one (WordPiece's ##).
STARTS = range(6, 10_000)
CONTINUATIONS = range(10_000, V)
WORD_START = [PAD < i < 10_000 and i not in (PAD, UNK, CLS, SEP, MASK) for i in range(V)]
TABLES = MaskTables.build(V, [PAD, UNK, CLS, SEP, MASK], WORD_START, MASK)
DRAWS = 6  # epochs of each row: new noise each


def _rows(count: int, seed: int) -> list[np.ndarray]:
    """Rows `[CLS] sentences [SEP]`: sentences of 3-20 words ending in ".", words of 1-3
    pieces, every piece's id distinct within its row (so a row's tokens can be found again
    in its noise)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(count):
        starts = iter(rng.permutation(STARTS))
        rest = iter(rng.permutation(CONTINUATIONS))
        tokens = [CLS]
        for _ in range(rng.integers(3, 9)):
            for _ in range(rng.integers(3, 21)):
                tokens.append(int(next(starts)))
                tokens += [int(next(rest)) for _ in range(rng.choice(3, p=[0.6, 0.3, 0.1]))]
            tokens.append(STOP)
        rows.append(np.array([*tokens, SEP], dtype=np.int64))
    return rows


class _Copies:
    """The rows, a new tensor each time: without sentence permutation fairseq's masking
    writes into the tensor its dataset returned, so the row the next epoch reads would
    already be masked (its dataset's blocks are slices of one buffer)."""

    def __init__(self, rows: list[np.ndarray]) -> None:
        self.rows = rows

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor(self.rows[i])

    def __len__(self) -> int:
        return len(self.rows)


def _dataset(rows: list[np.ndarray], s: DenoisingSettings) -> DenoisingDataset:
    return DenoisingDataset(
        _Copies(rows),
        np.array([len(r) for r in rows]),
        Dictionary(V, CLS, SEP, STOP),
        MASK,
        torch.tensor(WORD_START, dtype=torch.uint8),
        shuffle=False,
        seed=1,
        mask=s.mask_ratio,
        mask_random=s.random_ratio,
        insert=s.insert_ratio,
        rotate=s.rotate_ratio,
        permute_sentences=s.permute_sentences,
        bpe="gpt2",
        replace_length=1,
        mask_length="span-poisson",
        poisson_lambda=s.poisson_lambda,
    )


def _reference(rows: list[np.ndarray], s: DenoisingSettings) -> list[tuple[int, np.ndarray]]:
    torch.manual_seed(0)  # fairseq draws most of its noise from torch's global generator
    ds = _dataset(rows, s)
    out = []
    for epoch in range(DRAWS):
        ds.set_epoch(epoch)
        out += [(i, ds[i]["source"].numpy()) for i in range(len(rows))]
    return out


def _ours(rows: list[np.ndarray], s: DenoisingSettings) -> list[tuple[int, np.ndarray]]:
    noise = Denoising(TABLES, STOP, PAD, SEP, s)
    return [
        (i, noise.noise(row, key=epoch * 1_000_003 + i))
        for epoch in range(DRAWS)
        for i, row in enumerate(rows)
    ]


def _measures(rows: list[np.ndarray], outputs: list[tuple[int, np.ndarray]]) -> dict[str, list]:
    """Per noised row: its length, masks, foreign (random) tokens, tokens where they were;
    and per deleted run of the original (a span, or spans that met) its length; per
    `[MASK]` whether it was inserted (both its neighbours kept and adjacent)."""
    m: dict[str, list] = {k: [] for k in ("length", "masks", "random", "in_place", "run", "insert")}
    for i, out in outputs:
        row = rows[i]
        where = {int(t): p for p, t in enumerate(row) if t not in (CLS, SEP, STOP)}
        m["length"].append(len(out))
        m["masks"].append(int((out == MASK).sum()))
        m["random"].append(
            sum(
                1
                for t in out
                if t not in (MASK, STOP) and int(t) not in where and t not in (CLS, SEP)
            )
        )
        m["in_place"].append(
            sum(1 for p, t in enumerate(out) if p < len(row) and row[p] == t) / len(row)
        )
        kept = sorted(where[int(t)] for t in out if int(t) in where)
        present = np.zeros(len(row), dtype=bool)
        present[kept] = True
        present[row == STOP] = True
        present[[0, -1]] = True
        # Runs of the original's tokens missing from the noise.
        edges = np.diff(np.concatenate([[0], (~present).astype(np.int8), [0]]))
        m["run"] += list(np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1))
        for p, t in enumerate(out[1:-1], start=1):
            if t == MASK and int(out[p - 1]) in where and int(out[p + 1]) in where:
                m["insert"].append(int(where[int(out[p + 1])] == where[int(out[p - 1])] + 1))
            elif t == MASK:
                m["insert"].append(0)
    return m


def _agree(name: str, a: list[float], b: list[float]) -> None:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert (len(x) < 2) == (len(y) < 2), (name, len(x), len(y))
    if len(x) < 2:  # nothing of the kind from either (no masks without masking)
        return
    se = math.sqrt(x.var(ddof=1) / len(x) + y.var(ddof=1) / len(y))
    assert abs(x.mean() - y.mean()) <= 4 * se + 1e-12, (name, x.mean(), y.mean(), se)


@pytest.fixture(scope="module")
def rows() -> list[np.ndarray]:
    return _rows(150, seed=7)


def _compare(rows: list[np.ndarray], s: DenoisingSettings) -> tuple[dict, dict]:
    ref, ours = _measures(rows, _reference(rows, s)), _measures(rows, _ours(rows, s))
    for name in ref:
        _agree(name, ref[name], ours[name])
    return ref, ours


def test_infilling_and_permutation_match_fairseq(rows: list[np.ndarray]) -> None:
    ref, ours = _compare(rows, DenoisingSettings())
    # The span lengths, each length's share (1 .. 9 and longer).
    for k in range(1, 11):
        _agree(
            f"run of {k}",
            [min(r, 10) == k for r in ref["run"]],
            [min(r, 10) == k for r in ours["run"]],
        )
    # What the noise is: 30% of the words, less where spans met, in spans of 3.2 words on
    # average (a Poisson(3) length given it is not 0).
    tokens = DRAWS * sum(len(r) - 2 - int((r == STOP).sum()) for r in rows)
    assert 0.25 < sum(ours["run"]) / tokens < 0.31
    assert 2.5 < np.mean(ours["run"]) / 1.5 < 4.0  # 1.5 pieces a word
    assert np.mean(ours["in_place"]) < 0.5  # the sentences moved


def test_each_noise_alone_matches_fairseq(rows: list[np.ndarray]) -> None:
    """Permutation alone, infilling alone with more random tokens, insertion, rotation."""
    settings = [
        DenoisingSettings(mask_ratio=0.0),
        DenoisingSettings(permute_sentences=0.0, random_ratio=0.5, poisson_lambda=1.5),
        DenoisingSettings(permute_sentences=0.0, mask_ratio=0.0, insert_ratio=0.1),
        DenoisingSettings(permute_sentences=0.5, mask_ratio=0.15, rotate_ratio=0.5),
    ]
    for s in settings:
        _, ours = _compare(rows[:60], s)
        if s.mask_ratio == 0 and s.insert_ratio == 0:
            assert set(ours["length"]) == {len(r) for r in rows[:60]}  # nothing lost or added
        if s.insert_ratio:
            assert np.mean(ours["insert"]) > 0.6  # not counted: beside a "." or another mask


def test_span_distribution_is_fairseqs() -> None:
    for rate in (1.5, 3.0, 3.5):
        reference = _dataset([], DenoisingSettings(poisson_lambda=rate)).mask_span_distribution
        p = span_distribution(rate)
        if rate == 3.0:
            assert len(p) == 18  # k = 0 .. 17: P(17) < 1e-7 < P(16)
        np.testing.assert_allclose(p, reference.probs.double().numpy(), rtol=1e-6)


def test_a_rows_noise_is_its_keys(rows: list[np.ndarray]) -> None:
    noise = Denoising(TABLES, STOP, PAD, SEP)
    a = noise.noise(rows[0], key=11)
    assert np.array_equal(a, noise.noise(rows[0], key=11))
    assert not np.array_equal(a, noise.noise(rows[0], key=12))
    assert a[0] == CLS and a[-1] == SEP


def test_batch_noise_is_each_rows_and_labels_are_the_rows(rows: list[np.ndarray]) -> None:
    width = max(len(r) for r in rows[:5])
    ids = torch.full((5, width), PAD)
    for i, r in enumerate(rows[:5]):
        ids[i, : len(r)] = torch.from_numpy(r)
    real = ids != PAD
    batch = {"input_ids": ids.clone(), "attention_mask": real.long()}
    keys = torch.tensor([5, 6, 7, 8, 9])
    noise = Denoising(TABLES, STOP, PAD, SEP)
    noise(batch, keys)
    for i, r in enumerate(rows[:5]):
        n = int(batch["attention_mask"][i].sum())
        assert torch.equal(batch["input_ids"][i, :n], torch.from_numpy(noise.noise(r, 5 + i)))
        assert (batch["input_ids"][i, n:] == PAD).all()
        assert torch.equal(batch["labels"][i, : len(r)], torch.from_numpy(r))
        assert (batch["labels"][i, len(r) :] == IGNORE_INDEX).all()
        # transformers' shift_tokens_right of the labels (-100 read as pad) behind </s>.
        expected = torch.full((width,), PAD)
        expected[0], expected[1 : len(r) + 1] = SEP, torch.from_numpy(r)[: width - 1]
        assert torch.equal(batch[DECODER_INPUTS][i], expected)
        stats = batch[DENOISE_STATS][i].tolist()
        assert stats == [len(r), n, int((batch["input_ids"][i, :n] == MASK).sum())]
    assert batch["input_ids"].shape[1] % 8 == 0


def test_a_row_without_full_stops_is_one_sentence() -> None:
    row = np.array([CLS, *range(6, 40), SEP], dtype=np.int64)
    s = DenoisingSettings(mask_ratio=0.0)
    assert np.array_equal(Denoising(TABLES, STOP, PAD, SEP, s).noise(row, 3), row)
    assert np.array_equal(Denoising(TABLES, None, PAD, SEP, s).noise(row, 3), row)
