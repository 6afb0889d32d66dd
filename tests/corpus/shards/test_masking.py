"""Statistical tests of the shared masking definition. Tolerances are the shard-builder
issue's: masked share 15% +- 0.5 points, 80/10/10 split +- 1.5 points. With ~240k maskable
tokens the standard error of the share is under 0.1 point, so these are not flaky."""

import pytest
import torch

from clozeworks.corpus.shards.counter_rng import sequence_keys
from clozeworks.corpus.shards.masking import (
    IGNORE_INDEX,
    MaskTables,
    mask_tokens,
    pad_batch,
    run_starts,
)
from clozeworks.schemas.masking import MaskingSettings

VOCAB = 1000
SPECIAL = [0, 1, 2, 3, 4]  # pad unk cls sep mask
MASK_ID = 4


def make_batch(n: int = 2000, length: int = 128, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(length // 2, length + 1, (n,), generator=g)
    seqs = []
    for ln in lengths.tolist():
        body = torch.randint(5, VOCAB, (ln - 2,), generator=g)
        seqs.append(torch.cat([torch.tensor([2]), body, torch.tensor([3])]))
    ids, attention = pad_batch(seqs, pad_id=0)
    word_start = (torch.rand(VOCAB, generator=g) < 0.7).tolist()
    tables = MaskTables.build(VOCAB, SPECIAL, word_start, MASK_ID)
    keys = sequence_keys(1234, 0, torch.arange(n))
    return ids, attention, keys, tables


@pytest.fixture(scope="module")
def batch():
    return make_batch()


def maskable(ids, attention, tables):
    return attention & ~tables.special[ids]


@pytest.mark.parametrize("kind", ["token", "wwm", "span", "ngram"])
def test_share_split_and_specials(batch, kind: str) -> None:
    ids, attention, keys, tables = batch
    r = mask_tokens(ids, attention, keys, tables, MaskingSettings(kind=kind))
    can = maskable(ids, attention, tables)
    share = r.masked.sum().item() / can.sum().item()
    assert abs(share - 0.15) <= 0.005, share
    assert not (r.masked & ~can).any(), "a special or padding position was chosen"
    acts = r.action[r.masked]
    split = [(acts == a).float().mean().item() for a in (1, 2, 3)]
    for got, want in zip(split, (0.8, 0.1, 0.1), strict=True):
        assert abs(got - want) <= 0.015, split
    replaced = r.input_ids[r.action == 2]
    assert not tables.special[replaced].any(), "a random replacement was a special token"
    assert (r.input_ids[r.action == 1] == MASK_ID).all()
    assert torch.equal(r.input_ids[r.action == 3], ids[r.action == 3])
    assert torch.equal(r.input_ids[~r.masked], ids[~r.masked])
    assert torch.equal(r.labels[r.masked], ids[r.masked])
    assert (r.labels[~r.masked] == IGNORE_INDEX).all()


def test_token_budget_is_exact(batch) -> None:
    ids, attention, keys, tables = batch
    r = mask_tokens(ids, attention, keys, tables, MaskingSettings(kind="token"))
    n = maskable(ids, attention, tables).sum(1).float()
    want = torch.clamp(torch.round(n * 0.15), min=1)
    assert torch.equal(r.masked.sum(1).float(), want)


def test_max_predictions_is_a_hard_cap(batch) -> None:
    ids, attention, keys, tables = batch
    for kind in ("token", "wwm", "span"):
        r = mask_tokens(ids, attention, keys, tables, MaskingSettings(kind=kind, max_predictions=7))
        assert r.masked.sum(1).max().item() <= 7


def word_starts(ids, attention, tables):
    can = maskable(ids, attention, tables)
    return (tables.word_start[ids] | ~torch.roll(can, 1, 1)) & can


def per_unit(r, values):
    """[B, L] sums of `values` per (row, unit id)."""
    out = torch.zeros(r.unit_ids.shape, dtype=torch.int64)
    return out.scatter_add_(1, r.unit_ids, values.to(torch.int64))


def test_whole_words_are_masked_whole(batch) -> None:
    ids, attention, keys, tables = batch
    r = mask_tokens(ids, attention, keys, tables, MaskingSettings(kind="wwm"))
    can = maskable(ids, attention, tables)
    # every unit is all masked or all unmasked
    size, hit = per_unit(r, can), per_unit(r, r.masked)
    assert ((hit == 0) | (hit == size)).all()
    # and a unit is a word: it starts at a word-start piece or right after a special token
    first = torch.ones_like(can)
    first[:, 1:] = (r.unit_ids[:, 1:] != r.unit_ids[:, :-1]) | ~can[:, :-1]
    assert torch.equal(first & can, word_starts(ids, attention, tables))


def taken_unit_words(r, ids, attention, tables):
    """Number of words in every taken unit (words counted by word-start pieces)."""
    words = per_unit(r, word_starts(ids, attention, tables) & r.masked)
    return words[per_unit(r, r.masked) > 0].float()


def test_spans_are_whole_words_with_one_action_per_run(batch) -> None:
    # How long the runs are is compared with SpanBERT's own loop in
    # test_masking_reference.py; here, the structure: a span covers whole words except the
    # one the budget cuts (at most one per row), and 80/10/10 is decided once per run.
    ids, attention, keys, tables = batch
    r = mask_tokens(ids, attention, keys, tables, MaskingSettings(kind="span"))
    can = maskable(ids, attention, tables)
    words = torch.cumsum(word_starts(ids, attention, tables).long(), 1)
    size = torch.zeros_like(words).scatter_add_(1, words, can.long())
    hit = torch.zeros_like(words).scatter_add_(1, words, r.masked.long())
    assert (((hit > 0) & (hit < size)).sum(1) <= 1).all()
    starts = run_starts(r.masked)
    lo = torch.full(r.masked.shape, 9, dtype=torch.int64)
    hi = torch.zeros(r.masked.shape, dtype=torch.int64)
    act = r.action.to(torch.int64)
    lo.scatter_reduce_(1, starts.clamp(min=0), act.where(r.masked, 9), "amin")
    hi.scatter_reduce_(1, starts.clamp(min=0), act.where(r.masked, 0), "amax")
    first = r.masked & (starts == torch.arange(r.masked.shape[1]))
    assert torch.equal(lo[first], hi[first])


def full_rows(n: int, length: int):
    """Rows that fill the length, as packed modes write them: the cap meets the budget."""
    g = torch.Generator().manual_seed(5)
    body = torch.randint(5, VOCAB, (n, length - 2), generator=g)
    ids = torch.cat([torch.full((n, 1), 2), body, torch.full((n, 1), 3)], 1)
    word_start = (torch.rand(VOCAB, generator=g) < 0.7).tolist()
    tables = MaskTables.build(VOCAB, SPECIAL, word_start, MASK_ID)
    return ids, torch.ones_like(ids, dtype=torch.bool), sequence_keys(9, 0, torch.arange(n)), tables


@pytest.mark.parametrize("kind", ["token", "wwm", "span", "ngram"])
def test_a_cap_equal_to_the_budget_keeps_the_share(kind: str) -> None:
    # max_predictions = round(0.15 * 128) = 19 is the budget of a full row: the unit that
    # would cross it never fits, so the rest of the budget is filled (first fit; span cuts
    # its last span where the budget ends, inside a word if need be, as SpanBERT does).
    ids, attention, keys, tables = full_rows(2000, 128)
    r = mask_tokens(ids, attention, keys, tables, MaskingSettings(kind=kind, max_predictions=19))
    assert r.masked.sum(1).max().item() <= 19
    share = r.masked.sum().item() / maskable(ids, attention, tables).sum().item()
    assert abs(share - 0.15) <= 0.005, share
    if kind != "token":  # words stay whole, except the one SpanBERT's budget cuts
        can = maskable(ids, attention, tables)
        words = torch.cumsum(word_starts(ids, attention, tables).long(), 1)
        size = torch.zeros_like(words).scatter_add_(1, words, can.long())
        hit = torch.zeros_like(words).scatter_add_(1, words, r.masked.long())
        cut = ((hit > 0) & (hit < size)).sum(1)
        assert (cut <= (1 if kind == "span" else 0)).all()


def test_ngrams_are_whole_words_of_at_most_three(batch) -> None:
    # The lengths ALBERT's loop produces are compared with it in test_masking_reference.py.
    ids, attention, keys, tables = batch
    r = mask_tokens(ids, attention, keys, tables, MaskingSettings(kind="ngram"))
    sizes = taken_unit_words(r, ids, attention, tables)
    assert sizes.min().item() >= 1 and sizes.max().item() <= 3
    assert (sizes == 3).any()
    can = maskable(ids, attention, tables)
    words = torch.cumsum(word_starts(ids, attention, tables).long(), 1)
    size = torch.zeros_like(words).scatter_add_(1, words, can.long())
    hit = torch.zeros_like(words).scatter_add_(1, words, r.masked.long())
    assert ((hit == 0) | (hit == size)).all()


def test_masks_are_a_pure_function_of_seed_epoch_and_index() -> None:
    ids, attention, keys, tables = make_batch(n=64)
    settings = MaskingSettings(kind="span")
    full = mask_tokens(ids, attention, keys, tables, settings)
    # the same sequences in another batch, in another order, padded to another length
    order = torch.tensor([5, 3, 40, 17])
    extra = torch.zeros((4, 16), dtype=ids.dtype)
    part = mask_tokens(
        torch.cat([ids[order], extra], 1),
        torch.cat([attention[order], extra.bool()], 1),
        keys[order],
        tables,
        settings,
    )
    length = ids.shape[1]
    assert torch.equal(part.input_ids[:, :length], full.input_ids[order])
    # another epoch gives another mask
    other = mask_tokens(ids, attention, sequence_keys(1234, 1, torch.arange(64)), tables, settings)
    assert not torch.equal(other.masked, full.masked)


def test_rows_without_maskable_tokens_get_no_mask() -> None:
    ids = torch.tensor([[2, 3, 0, 0], [2, 7, 8, 3]])
    attention = ids != 0
    tables = MaskTables.build(VOCAB, SPECIAL, None, MASK_ID)
    r = mask_tokens(ids, attention, sequence_keys(0, 0, torch.arange(2)), tables, MaskingSettings())
    assert r.masked[0].sum() == 0 and r.masked[1].sum() == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_same_masks_on_gpu(batch) -> None:
    ids, attention, keys, tables = batch
    cpu = mask_tokens(ids, attention, keys, tables, MaskingSettings(kind="wwm"))
    gpu = mask_tokens(
        ids.cuda(), attention.cuda(), keys.cuda(), tables.to("cuda"), MaskingSettings(kind="wwm")
    )
    assert torch.equal(cpu.input_ids, gpu.input_ids.cpu())


def frequency_tables(tables: MaskTables) -> tuple[MaskTables, torch.Tensor]:
    """The same tables with corpus counts: ids 10 and 11 are half and a fifth of the text."""
    counts = torch.ones(VOCAB, dtype=torch.int64)
    counts[SPECIAL] = 7  # counted in text, but never a replacement
    counts[10], counts[11] = 1000, 400
    counts[12:] = 0
    counts[5:10] = 120  # 5 ids x 120 = 600 -> 0.3 of the regular mass
    word_start = tables.word_start.tolist()
    built = MaskTables.build(VOCAB, SPECIAL, word_start, tables.mask_id, counts.tolist())
    regular = counts.clone().double()
    regular[SPECIAL] = 0
    return built, regular / regular.sum()


@pytest.mark.parametrize(
    ("kind", "replacement", "by_frequency"),
    [
        ("span", None, True),
        ("token", None, False),
        ("span", "uniform", False),
        ("token", "frequency", True),
    ],
)
def test_random_replacements_follow_corpus_frequency_for_span(
    batch, kind, replacement, by_frequency
) -> None:
    """SpanBERT draws its 10% random tokens by corpus frequency (masking.py: "sample random
    token according to input distribution"); BERT draws them uniformly."""
    ids, attention, keys, tables = batch
    tables, shares = frequency_tables(tables)
    settings = MaskingSettings(kind=kind, replacement=replacement)
    r = mask_tokens(ids, attention, keys, tables, settings)
    drawn = r.input_ids[r.action == 2]
    assert drawn.numel() > 1500
    assert not tables.special[drawn].any()
    observed = torch.bincount(drawn, minlength=VOCAB).double() / drawn.numel()
    if by_frequency:
        # Each share within 4 binomial sd of its corpus share; ids never seen never drawn.
        sd = (shares * (1 - shares) / drawn.numel()).sqrt()
        assert ((observed - shares).abs() <= 4 * sd + 1e-9).all()
    else:
        assert observed[10] < 0.01 and (observed[12:] > 0).sum() > 300  # spread over the pool
