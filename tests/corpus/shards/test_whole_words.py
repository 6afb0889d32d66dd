"""Whole-word masking's fast path gives exactly the masks of ALBERT's loop with one-word
n-grams (the loop run with a length table that always draws one)."""

import pytest
import torch

from clozeworks.corpus.shards.spans import WordTable, albert_ngrams

ONE = torch.tensor([1.0])
# Two lengths, the second never drawn: the general loop, n always 1.
LOOP_OF_ONE = torch.tensor([1.0, 1.0])


def _batch(gen: torch.Generator, rows: int, length: int) -> tuple[WordTable, torch.Tensor]:
    """Rows of words of 1-4 tokens, specials at the ends and some padding."""
    index = torch.zeros(rows, length, dtype=torch.int64)
    maskable = torch.zeros(rows, length, dtype=torch.bool)
    for r in range(rows):
        real = int(torch.randint(2, length + 1, (1,), generator=gen))
        word, pos = 0, 1
        while pos < real - 1:
            size = int(torch.randint(1, 5, (1,), generator=gen))
            end = min(pos + size, real - 1)
            index[r, pos:end] = word
            maskable[r, pos:end] = True
            word, pos = word + 1, end
    return WordTable.build(index, maskable), maskable


@pytest.mark.parametrize("length", [8, 33, 128, 512])
def test_the_fast_path_equals_the_loop(length: int) -> None:
    gen = torch.Generator().manual_seed(length)
    for trial in range(25):
        table, maskable = _batch(gen, 48, length)
        share = [0.0, 0.15, 0.5, 1.0][trial % 4]
        budget = (maskable.sum(1) * share).round().to(torch.int64)
        keys = torch.randint(0, 1 << 32, (48, 2), generator=gen)
        fast = albert_ngrams(table, maskable, budget, keys[:, 0], keys[:, 1], ONE)
        loop = albert_ngrams(table, maskable, budget, keys[:, 0], keys[:, 1], LOOP_OF_ONE)
        assert torch.equal(fast[0], loop[0]), trial
        assert torch.equal(fast[1], loop[1]), trial
        assert (fast[0].sum(1) <= budget).all()
