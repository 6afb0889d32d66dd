"""The batch fields SpanBERT's and StructBERT's objectives read, built from real masks."""

import torch

from clozeworks.corpus.shards.masking import MaskTables, mask_tokens, pad_batch, sequence_keys
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.data.masking import BatchMasker, span_boundaries, word_structure

VOCAB = 1000
SPECIAL = [0, 1, 2, 3, 4]


def rows(n=500, length=128, seed=0):
    g = torch.Generator().manual_seed(seed)
    seqs = []
    for ln in torch.randint(length // 2, length + 1, (n,), generator=g).tolist():
        seqs.append(
            torch.cat([torch.tensor([2]), torch.randint(5, VOCAB, (ln - 2,)), torch.tensor([3])])
        )
    ids, attention = pad_batch(seqs, 0)
    tables = MaskTables.build(VOCAB, SPECIAL, (torch.rand(VOCAB, generator=g) < 0.7).tolist(), 4)
    return ids, attention, sequence_keys(11, 0, torch.arange(n)), tables


def test_span_boundaries_of_a_known_row() -> None:
    masked = torch.tensor([[0, 1, 1, 1, 0, 1, 1, 0]], dtype=torch.bool)
    units = torch.tensor([[0, 1, 1, 2, 3, 4, 4, 5]])  # two spans touch at 2|3: two spans
    left, right, offsets = span_boundaries(masked, units)
    assert left.tolist() == [[0, 0, 0, 2, 0, 4, 4, 0]]
    assert right.tolist() == [[0, 3, 3, 4, 0, 7, 7, 0]]
    assert offsets.tolist() == [[0, 0, 1, 0, 0, 0, 1, 0]]


def test_span_boundaries_lie_just_outside_every_real_span() -> None:
    ids, attention, keys, tables = rows()
    r = mask_tokens(ids, attention, keys, tables, MaskingSettings(kind="span"))
    left, right, offsets = span_boundaries(r.masked, r.unit_ids)
    b, i = r.masked.nonzero(as_tuple=True)
    lo, hi = left[b, i], right[b, i]
    assert (lo < i).all() and (hi > i).all() and torch.equal(offsets[b, i], i - lo - 1)
    # everything strictly between the boundaries is masked and of one unit
    for row, pos in list(zip(b.tolist(), i.tolist(), strict=True))[:3000:7]:
        inside = slice(int(left[row, pos]) + 1, int(right[row, pos]))
        assert r.masked[row, inside].all()
        assert (r.unit_ids[row, inside] == r.unit_ids[row, pos]).all()
    # and the boundaries themselves are not in that span
    outside_l = ~r.masked[b, lo] | (r.unit_ids[b, lo] != r.unit_ids[b, i])
    outside_r = ~r.masked[b, hi] | (r.unit_ids[b, hi] != r.unit_ids[b, i])
    assert outside_l.all() and outside_r.all()


def test_word_structure_shuffles_five_percent_of_free_trigrams() -> None:
    ids, attention, keys, tables = rows(n=2000)
    r = mask_tokens(ids, attention, keys, tables, MaskingSettings())
    free = attention & ~tables.special[ids] & ~r.masked
    shuffled, labels, positions = word_structure(r.input_ids, free, keys, prob=0.05)
    moved = labels != -100
    assert not (moved & ~free).any(), "a masked, special or padding position was shuffled"
    assert torch.equal(labels[moved], r.input_ids[moved])
    assert torch.equal(shuffled[~moved], r.input_ids[~moved])
    b, i = moved.nonzero(as_tuple=True)
    assert torch.equal(shuffled[b, i], r.input_ids[b, positions[b, i]])
    assert ((positions[b, i] - i).abs() <= 2).all()
    # trigrams: 3 positions each, and never left in their own order
    assert moved.sum() % 3 == 0
    trigrams = moved.sum().item() // 3
    assert (shuffled[moved] != labels[moved]).any()
    # about 5% of the trigrams whose three positions are free (+- 0.5 point; n ~ 75k)
    eligible = (free[:, :-2] & free[:, 1:-1] & free[:, 2:]).sum().item() / 3
    assert abs(trigrams / eligible - 0.05) < 0.005, trigrams / eligible


def test_masker_fields_are_a_pure_function_of_the_keys() -> None:
    ids, attention, keys, tables = rows(n=64)
    masker = BatchMasker(tables, MaskingSettings(kind="span"), sbo=True, wso_prob=0.05)
    full = {"input_ids": ids, "attention_mask": attention.long()}
    masker(full, keys)
    order = torch.tensor([9, 2, 33])
    part = {"input_ids": ids[order], "attention_mask": attention[order].long()}
    masker(part, keys[order])
    assert set(full) == {
        "input_ids",
        "attention_mask",
        "labels",
        "sbo_left_positions",
        "sbo_right_positions",
        "sbo_offsets",
        "wso_labels",
        "wso_positions",
    }
    for name, value in part.items():
        assert torch.equal(value, full[name][order]), name
