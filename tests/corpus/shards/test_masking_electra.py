"""ELECTRA's sampling against google-research/electra's pretrain/pretrain_helpers.py.

`electra_mask` is its `mask()` in numpy, line for line where it decides anything: the
number to predict, max(1, min(N, round(mask_prob x real tokens))) with [CLS] and [SEP]
counted and N = int((mask_prob + 0.005) x max length) (configure_pretraining.py);
positions drawn with `tf.random.categorical`, with replacement, from the candidates (no
[CLS], [SEP], [MASK], padding); 85% of the draws set to [MASK], the rest left as they are;
a position drawn twice updated once (`scatter_update`). `electra_sample` is its
`sample_from_softmax`. Ours: `mask_tokens` with the electra preset's 85/0/15 and
`budget = "electra"` (the reference's), or the default budget (15% of maskable tokens
without replacement: the difference in docs/design.md).

Tolerances: 2,000 rows of 64-128 tokens; a row's distinct count has sd about 1 token, so
the mean over rows is known to 0.03 tokens; we allow 0.1. The [MASK] share of about
30,000 masked positions has sd 0.2 points; we allow 1.
"""

import numpy as np
import torch

from clozeworks.corpus.shards.masking import mask_tokens
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.models.electra import gumbel_sample
from tests.corpus.shards.test_masking import MASK_ID, SPECIAL, make_batch


def electra_mask(ids, input_mask, mask_prob, max_seq_length, rng):
    """(input ids after masking, masked positions) as ELECTRA's `mask()`."""
    b, length = ids.shape
    n = int((mask_prob + 0.005) * max_seq_length)  # max_predictions_per_seq
    candidates = input_mask & ~np.isin(ids, SPECIAL)
    num_tokens = input_mask.sum(-1).astype(np.float32)
    num_to_predict = np.maximum(1, np.minimum(n, np.round(num_tokens * mask_prob).astype(int)))
    weights = np.arange(n)[None, :] < num_to_predict[:, None]
    sample_prob = candidates / candidates.sum(-1, keepdims=True)
    positions = np.stack([rng.choice(length, size=n, p=p) for p in sample_prob])  # categorical
    positions = positions * weights
    replace_with_mask = positions * (rng.random((b, n)) < 0.85)
    out = ids.copy()
    masked = np.zeros_like(candidates)
    for row in range(b):
        for pos, to_mask in zip(positions[row], replace_with_mask[row], strict=True):
            if pos > 0:  # scatter_update ignores position 0 ([CLS]; unused draws are 0)
                masked[row, pos] = True
            if to_mask > 0:
                out[row, to_mask] = MASK_ID
    return out, masked


def electra_sample(logits, uniform_noise):
    """`sample_from_softmax`: the argmax of softmax(logits + Gumbel noise)."""
    gumbel_noise = -np.log(-np.log(uniform_noise + 1e-9) + 1e-9)
    return np.argmax(logits + gumbel_noise, -1)


def test_positions_and_replacements_match_electras() -> None:
    ids, attention, keys, tables = make_batch(n=2000, length=128)
    ref_ids, ref_masked = electra_mask(
        ids.numpy(), attention.numpy(), 0.15, 128, np.random.default_rng(0)
    )
    electra = MaskingSettings(mask_ratio=0.85, random_ratio=0.0, budget="electra")
    ours = mask_tokens(ids, attention, keys, tables, electra)
    mine, theirs = ours.masked.sum(1).float(), torch.from_numpy(ref_masked.sum(1)).float()
    assert abs(mine.mean() - theirs.mean()) < 0.1, (mine.mean(), theirs.mean())
    assert abs(mine.std() - theirs.std()) < 0.15
    share = ours.masked.sum() / (attention & ~tables.special[ids]).sum()
    ref_share = ref_masked.sum() / (attention.numpy() & ~np.isin(ids.numpy(), SPECIAL)).sum()
    assert abs(float(share) - ref_share) < 0.002
    # 85% [MASK], the rest kept: never a random token
    mask_share = (ours.input_ids[ours.masked] == MASK_ID).float().mean()
    ref_mask_share = (ref_ids[ref_masked] == MASK_ID).mean()
    assert abs(float(mask_share) - 0.85) < 0.01 and abs(ref_mask_share - 0.85) < 0.01
    kept = ours.masked & (ours.input_ids != MASK_ID)
    assert torch.equal(ours.input_ids[kept], ids[kept])
    assert not (ours.input_ids[~ours.masked] != ids[~ours.masked]).any()

    # The default budget predicts 15% of maskable tokens, without repeats: more than
    # ELECTRA's draws leave (about 14%).
    default = mask_tokens(ids, attention, keys, tables, MaskingSettings(mask_ratio=0.85))
    default_share = default.masked.sum() / (attention & ~tables.special[ids]).sum()
    assert abs(float(default_share) - 0.15) < 0.002 and ref_share < 0.145


def test_generator_samples_are_electras_gumbel_max() -> None:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4000, 50, generator=g) * 3
    seed = 99
    ours = gumbel_sample(logits, seed)
    # The same uniform noise through ELECTRA's formula gives the same tokens.
    u = torch.rand(logits.shape, generator=torch.Generator().manual_seed(seed))
    theirs = electra_sample(logits.numpy(), u.numpy())
    assert (ours.numpy() == theirs).mean() > 0.999
    # And the samples follow softmax(logits): one row's logits 20,000 times, each token's
    # frequency within 4 standard errors of its probability.
    row = logits[:1].expand(20000, 50)
    drawn = torch.bincount(gumbel_sample(row, 7), minlength=50).double() / 20000
    p = torch.softmax(row[0].double(), -1)
    se = (p * (1 - p) / 20000).sqrt()
    assert ((drawn - p).abs() <= 4 * se + 1e-4).all()
