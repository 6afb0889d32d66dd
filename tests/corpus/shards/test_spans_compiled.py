"""Word, n-gram and span selection compiled for the CPU gives exactly the masks and units
of the lock-step tensor loops (the GPU's path), on random batches: word sizes, specials
inside a row, padding, budgets and length distributions of every kind the masker makes."""

import pytest
import torch

from clozeworks.corpus.shards import spans, spans_compiled
from clozeworks.corpus.shards.counter_rng import sequence_keys
from clozeworks.corpus.shards.masking import MaskTables, _lengths_cdf, mask_tokens
from clozeworks.schemas.masking import MaskingSettings

pytestmark = pytest.mark.skipif(not spans_compiled.AVAILABLE, reason="needs numba")

ONE = torch.tensor([1.0])


def _batch(gen: torch.Generator, rows: int, length: int, longest_word: int):
    """([B, L] word of each position, [B, L] maskable) as the masker numbers words: a
    non-maskable position ([CLS], a middle [SEP], padding) takes the word before it. Now
    and then a row has nothing maskable."""
    maskable = torch.zeros(rows, length, dtype=torch.bool)
    starts = torch.zeros(rows, length, dtype=torch.bool)
    for r in range(rows):
        real = 2 if r % 17 == 5 else int(torch.randint(2, length + 1, (1,), generator=gen))
        sep = int(torch.randint(1, max(2, real - 1), (1,), generator=gen)) if r % 3 else 0
        pos = 1
        while pos < real - 1:
            size = int(torch.randint(1, longest_word + 1, (1,), generator=gen))
            end = min(pos + size, real - 1)
            maskable[r, pos:end] = True
            starts[r, pos] = True
            pos = end
        if sep:
            maskable[r, sep] = False
    after_special = torch.ones_like(maskable)
    after_special[:, 1:] = ~maskable[:, :-1]
    first = maskable & (starts | after_special)
    word_of = torch.clamp(torch.cumsum(first.to(torch.int64), 1) - 1, min=0)
    return word_of, maskable


def _both(spanning, word_of, maskable, budget, keys, cdf, monkeypatch):
    args = (word_of, maskable, budget, keys[:, 0], keys[:, 1], cdf)
    compiled = spans.select_words(spanning, *args)
    with monkeypatch.context() as m:
        m.setattr(spans_compiled, "AVAILABLE", False)
        loop = spans.select_words(spanning, *args)
    return compiled, loop


def _check(kind: str, length: int, cdf_of, budget_of, monkeypatch) -> None:
    gen = torch.Generator().manual_seed(length + {"wwm": 0, "ngram": 1000, "span": 2000}[kind])
    for trial in range(80):
        cdf = cdf_of(trial)
        word_of, maskable = _batch(gen, 24, length, [1, 2, 4, 9][(trial // 4) % 4])
        share = [0.15, 0.0, 0.4, 1.0, 0.02][trial % 5]
        budget = budget_of(maskable.sum(1) * share).to(torch.int64)
        keys = torch.randint(0, 1 << 32, (24, 2), generator=gen)
        compiled, loop = _both(kind == "span", word_of, maskable, budget, keys, cdf, monkeypatch)
        assert torch.equal(compiled[0], loop[0]), (length, trial)
        assert torch.equal(compiled[1], loop[1]), (length, trial)
        if kind == "span":  # SpanBERT's last span may end inside a word: always the budget
            assert torch.equal(compiled[0].sum(1), budget), (length, trial)
        else:
            assert (compiled[0].sum(1) <= budget).all(), (length, trial)


@pytest.mark.parametrize("length", [8, 33, 128, 512])
def test_compiled_spans_equal_the_tensor_loop(length: int, monkeypatch) -> None:
    def cdf_of(trial: int) -> torch.Tensor:
        p = [0.2, 0.05, 0.5, 0.9][trial % 4]
        longest = [10, 1, 3, 30][(trial // 4) % 4]
        return _lengths_cdf(MaskingSettings(kind="span", span_p=p, span_max_words=longest))

    _check("span", length, cdf_of, torch.ceil, monkeypatch)


@pytest.mark.parametrize("length", [8, 33, 128, 512])
def test_compiled_ngrams_equal_the_tensor_loop(length: int, monkeypatch) -> None:
    def cdf_of(trial: int) -> torch.Tensor:
        longest = [3, 2, 5, 12][trial % 4]
        return _lengths_cdf(MaskingSettings(kind="ngram", ngram_max=longest))

    _check("ngram", length, cdf_of, torch.round, monkeypatch)


@pytest.mark.parametrize("length", [8, 33, 128, 512])
def test_compiled_whole_words_equal_the_tensor_loop(length: int, monkeypatch) -> None:
    _check("wwm", length, lambda trial: ONE, torch.round, monkeypatch)


@pytest.mark.parametrize("kind", ["wwm", "ngram", "span"])
def test_the_masker_takes_the_compiled_path_on_the_cpu_with_the_same_result(
    kind: str, monkeypatch
) -> None:
    gen = torch.Generator().manual_seed(7)
    vocab = 1000
    word_start = (torch.rand(vocab, generator=gen) < 0.7).tolist()
    tables = MaskTables.build(vocab, [0, 1, 2, 3, 4], word_start, mask_id=4)
    ids = torch.randint(5, vocab, (64, 128), generator=gen)
    ids[:, 0], ids[:, 63], ids[:, 127] = 2, 3, 3
    attention = torch.ones_like(ids, dtype=torch.bool)
    attention[::5, 100:] = False
    keys = sequence_keys(0, 0, torch.arange(64))
    calls = []
    real = spans_compiled.select
    monkeypatch.setattr(spans_compiled, "select", lambda *a: calls.append(1) or real(*a))
    settings = MaskingSettings(kind=kind)
    compiled = mask_tokens(ids, attention, keys, tables, settings)
    assert calls == [1]
    monkeypatch.setattr(spans_compiled, "AVAILABLE", False)
    loop = mask_tokens(ids, attention, keys, tables, settings)
    assert calls == [1]
    for name in ("input_ids", "labels", "masked", "unit_ids", "action"):
        assert torch.equal(getattr(compiled, name), getattr(loop, name)), name
    assert compiled.masked.any()
