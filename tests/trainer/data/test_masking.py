"""The batch fields SpanBERT's and StructBERT's objectives read, built from real masks."""

import torch

from clozeworks.corpus.shards.counter_rng import sequence_keys
from clozeworks.corpus.shards.masking import MaskTables, mask_tokens, pad_batch
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
    left, right, offsets = span_boundaries(masked)  # touching spans are one span
    assert left.tolist() == [[0, 0, 0, 0, 0, 4, 4, 0]]
    assert right.tolist() == [[0, 4, 4, 4, 0, 7, 7, 0]]
    assert offsets.tolist() == [[0, 0, 1, 2, 0, 0, 1, 0]]


def merge_intervals(intervals):
    """SpanBERT's merge_intervals (pretraining/fairseq/data/masking.py), as published."""
    merged = []
    for interval in sorted(intervals, key=lambda x: x[0]):
        if not merged or merged[-1][1] + 1 < interval[0]:
            merged.append(list(interval))
        else:
            merged[-1][1] = max(merged[-1][1], interval[1])
    return merged


def test_span_boundaries_are_spanbert_s_external_endpoints_never_masked() -> None:
    """SpanBERT's span_masking merges the sampled spans and takes [start - 1, end + 1] of
    each merged span as its SBO pair target: the same positions, from the same masks."""
    ids, attention, keys, tables = rows()
    r = mask_tokens(ids, attention, keys, tables, MaskingSettings(kind="span"))
    left, right, offsets = span_boundaries(r.masked)
    b, i = r.masked.nonzero(as_tuple=True)
    assert not r.masked[b, left[b, i]].any() and not r.masked[b, right[b, i]].any()
    assert torch.equal(offsets[b, i], i - left[b, i] - 1)
    for row in range(0, ids.shape[0], 5):
        # the units (spans as sampled) of this row, as intervals, merged as SpanBERT does
        units = r.unit_ids[row][r.masked[row]].tolist()
        pos = r.masked[row].nonzero().flatten().tolist()
        spans: dict[int, list[int]] = {}
        for u, p in zip(units, pos, strict=True):
            spans.setdefault(u, [p, p])[1] = p
        for start, end in merge_intervals(list(spans.values())):
            assert left[row, start] == start - 1 and right[row, end] == end + 1
            # one 80/10/10 decision per merged span, as span_masking draws `rand` once
            assert len(set(r.action[row, start : end + 1].tolist())) == 1


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
