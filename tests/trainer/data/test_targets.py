"""Targets of the generative objectives: GPT's next tokens and T5's span corruption.

Statistical tests state their tolerance: 4 binomial standard deviations (a false alarm
about once in 16,000 per bin), over draws that are a fixed function of the keys, so a test
either always passes or always fails.
"""

from __future__ import annotations

import math

import pytest
import torch

from clozeworks.corpus.shards.masking import IGNORE_INDEX
from clozeworks.schemas.errors import UsageError
from clozeworks.trainer.data.targets import (
    NOISE_STATS,
    CausalTargets,
    SpanCorruption,
    corrupted_lengths,
    noise_mask,
    t5_lengths,
)

CLS, SEP, PAD = 2, 3, 0
SENTINELS = torch.arange(1999, 1899, -1)  # <extra_id_0> is the last id, as in T5


def rows(lengths: list[int], seed: int = 0) -> dict[str, torch.Tensor]:
    """A collated batch of packed rows: [CLS] tokens [SEP], padded."""
    g = torch.Generator().manual_seed(seed)
    width = -(-(max(lengths) + 2) // 8) * 8
    ids = torch.full((len(lengths), width), PAD)
    for i, n in enumerate(lengths):
        ids[i, 0], ids[i, n + 1] = CLS, SEP
        ids[i, 1 : n + 1] = torch.randint(5, 1800, (n,), generator=g)
    mask = (torch.arange(width) < torch.tensor(lengths)[:, None] + 2).long()
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


def corrupt(batch: dict[str, torch.Tensor], keys: torch.Tensor) -> dict[str, torch.Tensor]:
    out = dict(batch)
    SpanCorruption(SENTINELS, SEP, PAD)(out, keys)
    return out


def test_t5_lengths_are_t5s() -> None:
    # T5's compute_input_and_target_lengths(512, 0.15, 3) and the paper's 512 / 114.
    assert t5_lengths(512) == (568, 114)
    assert corrupted_lengths(568) == (512, 114)
    assert t5_lengths(128) == (141, 29)  # 21 noise tokens in 7 spans: 141 - 21 + 7 + 1 = 128


def test_rows_of_568_tokens_give_inputs_of_512_and_targets_of_114() -> None:
    batch = corrupt(rows([568] * 64), torch.arange(64))
    assert batch["input_ids"].shape[1] == 512  # already a multiple of 8: no padding
    assert (batch["attention_mask"].sum(1) == 512).all()
    assert ((batch["labels"] != IGNORE_INDEX).sum(1) == 114).all()
    raw, noise, spans = batch[NOISE_STATS].T
    assert (raw == 568).all() and (noise == 85).all() and (spans == 28).all()
    assert "token_type_ids" not in batch


def test_inputs_and_targets_put_back_together_are_the_row() -> None:
    lengths = [568, 300, 61, 7, 2, 1, 0]
    batch = rows(lengths, seed=3)
    out = corrupt(batch, torch.arange(100, 107))
    sentinel = {int(s): i for i, s in enumerate(SENTINELS)}
    for i, n in enumerate(lengths):
        original = batch["input_ids"][i, 1 : n + 1].tolist()
        inputs = out["input_ids"][i, : int(out["attention_mask"][i].sum())].tolist()
        targets = [t for t in out["labels"][i].tolist() if t != IGNORE_INDEX]
        assert inputs[-1] == SEP and targets[-1] == SEP
        assert (len(inputs), len(targets)) == corrupted_lengths(n)
        pieces: dict[int, list[int]] = {}  # sentinel number -> the span it stands for
        current = None
        for t in targets[:-1]:
            if t in sentinel:
                current = sentinel[t]
                pieces[current] = []
            else:
                assert current is not None
                pieces[current].append(t)
        rebuilt = []
        for t in inputs[:-1]:
            rebuilt.extend(pieces[sentinel[t]] if t in sentinel else [t])
        assert rebuilt == original, f"row {i} of {n} tokens"
        numbers = [sentinel[t] for t in inputs if t in sentinel]
        assert numbers == list(range(len(numbers)))  # <extra_id_0>, <extra_id_1>, ...


def test_a_row_is_corrupted_the_same_in_any_batch() -> None:
    keys = torch.tensor([11, 12, 13])
    together = corrupt(rows([200, 50, 120], seed=1), keys)
    for i, _n in enumerate([200, 50, 120]):
        alone_batch = rows([200, 50, 120], seed=1)
        alone = corrupt({k: v[i : i + 1] for k, v in alone_batch.items()}, keys[i : i + 1])
        width = int(alone["attention_mask"].sum())
        assert torch.equal(together["input_ids"][i, :width], alone["input_ids"][0, :width])
        kept = alone["labels"][0] != IGNORE_INDEX
        assert torch.equal(together["labels"][i, : int(kept.sum())], alone["labels"][0][kept])
    again = corrupt(rows([200, 50, 120], seed=1), keys)
    assert torch.equal(again["input_ids"], together["input_ids"])
    other = corrupt(rows([200, 50, 120], seed=1), keys + 100)
    assert not torch.equal(other["input_ids"], together["input_ids"])


def _runs(mask: torch.Tensor) -> list[int]:
    lengths, run = [], 0
    for value in [*mask.tolist(), False]:
        if value:
            run += 1
        elif run:
            lengths.append(run)
            run = 0
    return lengths


def test_span_lengths_follow_a_uniform_composition() -> None:
    """85 noise tokens in 28 spans, every composition equally likely: a span is k long with
    probability C(84 - k, 26) / C(84, 27) (mean 85 / 28 = 3.04)."""
    n = 4000
    mask = noise_mask(torch.full((n,), 568), 568, torch.arange(n))
    spans = [k for row in mask for k in _runs(row)]
    assert len(spans) == 28 * n
    total = len(spans)
    for k in range(1, 9):
        p = math.comb(84 - k, 26) / math.comb(84, 27)
        seen = sum(1 for s in spans if s == k) / total
        assert abs(seen - p) < 4 * math.sqrt(p * (1 - p) / total), (k, seen, p)
    assert abs(sum(spans) / total - 85 / 28) < 1e-9


def test_noise_is_spread_evenly_and_rows_start_clean_and_end_noisy() -> None:
    """T5's interleaving starts every row with a gap and ends it with a noise span; in
    between, every stretch of the row is equally likely to be noise. Each of six stretches
    of the middle (positions 64..511) is compared with the whole middle, row by row, within
    4 standard errors of the mean difference over 4,000 rows."""
    n = 4000
    mask = noise_mask(torch.full((n,), 568), 568, torch.arange(n, 2 * n)).double()
    assert not mask[:, 0].any() and mask[:, 567].all()
    middle = mask[:, 64:512]  # [n, 448]
    whole = middle.mean(1)  # [n]
    for stretch in middle.chunk(6, dim=1):
        diff = stretch.mean(1) - whole  # [n]
        se = float(diff.std()) / math.sqrt(n)
        assert abs(float(diff.mean())) < 4 * se, (float(diff.mean()), se)
    assert abs(float(whole.mean()) - 85 / 568) < 0.01  # the ends take a little more


def test_too_few_sentinels_is_a_usage_error() -> None:
    batch = rows([568])
    with pytest.raises(UsageError, match=r"28 noise spans.*10 sentinels"):
        SpanCorruption(SENTINELS[:10], SEP, PAD)(batch, torch.arange(1))


def test_causal_labels_are_the_next_real_token() -> None:
    batch = rows([5, 2])
    CausalTargets()(batch)
    ids, labels = batch["input_ids"], batch["labels"]
    assert labels[0, :6].tolist() == ids[0, 1:7].tolist()
    assert (labels[0, 6:] == IGNORE_INDEX).all()  # after the last real token: nothing
    assert labels[1, :3].tolist() == ids[1, 1:4].tolist()
    assert (labels[1, 3:] == IGNORE_INDEX).all()
    assert "token_type_ids" not in batch
