"""SpanBERT's span loop compiled for the CPU gives exactly the masks and units of the
lock-step tensor loop (the GPU's path), on random batches: word sizes, padding, budgets
and length distributions of every kind the masker makes."""

import pytest
import torch

from clozeworks.corpus.shards import spans, spans_compiled
from clozeworks.corpus.shards.masking import _lengths_cdf
from clozeworks.schemas.masking import MaskingSettings

pytestmark = pytest.mark.skipif(not spans_compiled.AVAILABLE, reason="needs numba")


def _batch(gen: torch.Generator, rows: int, length: int, longest_word: int):
    """Rows of words of 1..longest_word tokens, specials at the ends, some padding, and now
    and then a row with nothing maskable."""
    index = torch.zeros(rows, length, dtype=torch.int64)
    maskable = torch.zeros(rows, length, dtype=torch.bool)
    for r in range(rows):
        real = int(torch.randint(2, length + 1, (1,), generator=gen))
        if r % 17 == 5:
            real = 2  # [CLS] [SEP]
        word, pos = 0, 1
        while pos < real - 1:
            size = int(torch.randint(1, longest_word + 1, (1,), generator=gen))
            end = min(pos + size, real - 1)
            index[r, pos:end] = word
            maskable[r, pos:end] = True
            word, pos = word + 1, end
    return spans.WordTable.build(index, maskable), maskable


def _both(table, maskable, budget, keys, cdf, monkeypatch):
    compiled = spans.spanbert_spans(table, maskable, budget, keys[:, 0], keys[:, 1], cdf)
    with monkeypatch.context() as m:
        m.setattr(spans_compiled, "AVAILABLE", False)
        loop = spans.spanbert_spans(table, maskable, budget, keys[:, 0], keys[:, 1], cdf)
    return compiled, loop


@pytest.mark.parametrize("length", [8, 33, 128, 512])
def test_the_compiled_loop_equals_the_tensor_loop(length: int, monkeypatch) -> None:
    gen = torch.Generator().manual_seed(length)
    for trial in range(80):
        p = [0.2, 0.05, 0.5, 0.9][trial % 4]
        longest = [10, 1, 3, 30][(trial // 4) % 4]
        cdf = _lengths_cdf(MaskingSettings(kind="span", span_p=p, span_max_words=longest))
        table, maskable = _batch(gen, 24, length, [1, 2, 4, 9][trial % 4])
        share = [0.15, 0.0, 0.4, 1.0, 0.02][trial % 5]
        budget = (maskable.sum(1) * share).ceil().to(torch.int64)
        keys = torch.randint(0, 1 << 32, (24, 2), generator=gen)
        compiled, loop = _both(table, maskable, budget, keys, cdf, monkeypatch)
        assert torch.equal(compiled[0], loop[0]), (length, trial)
        assert torch.equal(compiled[1], loop[1]), (length, trial)
        assert torch.equal(compiled[0].sum(1), budget), (length, trial)


def test_the_masker_takes_the_compiled_loop_on_the_cpu(monkeypatch) -> None:
    calls = []
    real = spans_compiled.spanbert_rows
    monkeypatch.setattr(spans_compiled, "spanbert_rows", lambda *a: calls.append(1) or real(*a))
    gen = torch.Generator().manual_seed(0)
    table, maskable = _batch(gen, 4, 64, 3)
    keys = torch.randint(0, 1 << 32, (4, 2), generator=gen)
    budget = (maskable.sum(1) * 0.15).ceil().to(torch.int64)
    cdf = _lengths_cdf(MaskingSettings(kind="span"))
    spans.spanbert_spans(table, maskable, budget, keys[:, 0], keys[:, 1], cdf)
    assert calls == [1]


@pytest.mark.parametrize("length", [8, 33, 128, 512])
def test_the_compiled_ngram_loop_equals_the_tensor_loop(length: int, monkeypatch) -> None:
    gen = torch.Generator().manual_seed(1000 + length)
    for trial in range(80):
        longest = [3, 2, 5, 12][trial % 4]
        cdf = _lengths_cdf(MaskingSettings(kind="ngram", ngram_max=longest))
        table, maskable = _batch(gen, 24, length, [1, 2, 4, 9][(trial // 4) % 4])
        share = [0.15, 0.0, 0.4, 1.0, 0.02][trial % 5]
        budget = (maskable.sum(1) * share).round().to(torch.int64)
        keys = torch.randint(0, 1 << 32, (24, 2), generator=gen)
        compiled = spans.albert_ngrams(table, maskable, budget, keys[:, 0], keys[:, 1], cdf)
        with monkeypatch.context() as m:
            m.setattr(spans_compiled, "AVAILABLE", False)
            loop = spans.albert_ngrams(table, maskable, budget, keys[:, 0], keys[:, 1], cdf)
        assert torch.equal(compiled[0], loop[0]), (length, trial)
        assert torch.equal(compiled[1], loop[1]), (length, trial)
        assert (compiled[0].sum(1) <= budget).all(), (length, trial)
