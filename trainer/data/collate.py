"""Pools of sequences -> padded batch tensors named as Hugging Face models take them.

Everything is whole-array numpy (no per-sequence Python), so collating a batch costs a few
array operations however many sequences it holds.
"""

from __future__ import annotations

import numpy as np
import torch

from clozeworks.corpus.shards.masking import IGNORE_INDEX
from clozeworks.trainer.data.read import Pool, ranges

SENTENCE_LABEL_NAMES = {
    "nsp": "next_sentence_label",
    "sop": "sentence_order_label",
    "sso": "sentence_order_label",
}
PAD_MULTIPLE = 8


def collate(pool: Pool, sel: np.ndarray, pad_id: int, mode: str) -> dict[str, torch.Tensor]:
    """The sequences `sel` of `pool` as input_ids, attention_mask, token_type_ids (+ the
    sentence label of pair modes, and `labels` for pre-masked sequences), padded to the
    longest rounded up to a multiple of 8."""
    starts = pool.offsets[sel]
    lengths = pool.offsets[sel + 1] - starts  # [B]
    longest = int(lengths.max(initial=0))
    width = max(PAD_MULTIPLE, -(-longest // PAD_MULTIPLE) * PAD_MULTIPLE)
    positions = np.arange(width)
    real = positions < lengths[:, None]  # [B, L]
    gather = starts[:, None] + positions  # [B, L]
    if len(pool.tokens) == 0:
        ids = np.full(real.shape, pad_id, dtype=np.int64)
    elif int(lengths.min(initial=0)) == width:  # packed sequences: no padding at all
        ids = pool.tokens[gather]
    else:
        np.minimum(gather, len(pool.tokens) - 1, out=gather)
        ids = np.where(real, pool.tokens[gather], pad_id)  # [B, L]
    batch = {
        "input_ids": torch.from_numpy(ids.astype(np.int64, copy=False)),
        "attention_mask": torch.from_numpy(real.astype(np.int64)),
    }
    if pool.segments is not None and pool.labels is not None:
        second = (positions >= pool.segments[sel, None]) & real  # [B, L]
        batch["token_type_ids"] = torch.from_numpy(second.astype(np.int64))
        batch[SENTENCE_LABEL_NAMES[mode]] = torch.from_numpy(pool.labels[sel].astype(np.int64))
    else:
        batch["token_type_ids"] = torch.zeros_like(batch["input_ids"])
    if pool.mlm_offsets is not None:
        assert pool.mlm_positions is not None and pool.mlm_labels is not None
        flat, offsets = ranges(pool.mlm_offsets[sel], pool.mlm_offsets[sel + 1])
        labels = np.full(ids.shape, IGNORE_INDEX, dtype=np.int64)
        rows = np.repeat(np.arange(len(sel)), np.diff(offsets))
        labels[rows, pool.mlm_positions[flat].astype(np.int64)] = pool.mlm_labels[flat]
        batch["labels"] = torch.from_numpy(labels)
    return batch
