"""Pools of sequences -> padded batch tensors named as Hugging Face models take them.

Everything is whole-array numpy (no per-sequence Python), so collating a batch costs a few
array operations however many sequences it holds.
"""

from __future__ import annotations

import numpy as np
import torch

from corpus.masking import IGNORE_INDEX
from trainer.data_read import Pool

SENTENCE_LABEL_NAMES = {
    "nsp": "next_sentence_label",
    "sop": "sentence_order_label",
    "sso": "sentence_order_label",
}
PAD_MULTIPLE = 8


def collate(pool: Pool, pad_id: int, mode: str) -> dict[str, torch.Tensor]:
    """input_ids, attention_mask, token_type_ids (+ the sentence label of pair modes, and
    `labels` for pre-masked sequences), padded to the longest rounded up to a multiple of 8.
    """
    lengths = pool.lengths
    longest = int(lengths.max(initial=0))
    width = max(PAD_MULTIPLE, -(-longest // PAD_MULTIPLE) * PAD_MULTIPLE)
    positions = np.arange(width)
    real = positions[None, :] < lengths[:, None]  # [B, L]
    gather = np.where(real, pool.offsets[:-1, None] + positions[None, :], 0)  # [B, L]
    tokens = pool.tokens if len(pool.tokens) else np.zeros(1, pool.tokens.dtype)
    ids = np.where(real, tokens[gather], pad_id).astype(np.int64)  # [B, L]
    batch = {
        "input_ids": torch.from_numpy(ids),
        "attention_mask": torch.from_numpy(real.astype(np.int64)),
    }
    if pool.segments is not None and pool.labels is not None:
        second = (positions[None, :] >= pool.segments[:, None]) & real  # [B, L]
        batch["token_type_ids"] = torch.from_numpy(second.astype(np.int64))
        batch[SENTENCE_LABEL_NAMES[mode]] = torch.from_numpy(pool.labels.astype(np.int64))
    else:
        batch["token_type_ids"] = torch.zeros_like(batch["input_ids"])
    if pool.mlm_offsets is not None:
        assert pool.mlm_positions is not None and pool.mlm_labels is not None
        labels = np.full(ids.shape, IGNORE_INDEX, dtype=np.int64)
        rows = np.repeat(np.arange(len(pool)), np.diff(pool.mlm_offsets))
        labels[rows, pool.mlm_positions.astype(np.int64)] = pool.mlm_labels
        batch["labels"] = torch.from_numpy(labels)
    return batch
