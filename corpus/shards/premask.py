"""Static masking (original BERT): masked copies of sequences, written into the shards.

The masking itself is `corpus.shards.masking.mask_tokens`, the one definition the trainer's
dynamic masking uses too. Each sequence's mask is keyed by `sequence_keys(seed, copy,
index)`: the dupe-factor copy plays the role of the epoch, and the index is derived from
the sequence's own 64-bit shuffle key, so a mask depends on neither the shard count nor
on which worker wrote the shard.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from clozeworks.corpus.shards.counter_rng import sequence_keys
from clozeworks.corpus.shards.masking import MaskTables, mask_tokens, pad_batch
from clozeworks.schemas.masking import MaskingSettings

# BERT's max_predictions_per_seq is 20 at length 128 and 80 at 512: about 15% of the length.
MAX_PREDICTIONS_SHARE = 0.15


def mask_index(key: int) -> int:
    """The non-negative int64 a 64-bit shuffle key stands for in `sequence_keys`."""
    return key >> 1


@dataclass(frozen=True)
class Masked:
    """One statically masked sequence: ids after masking, positions to predict (ascending)
    and the original ids at those positions."""

    tokens: np.ndarray
    positions: np.ndarray
    labels: np.ndarray


@dataclass
class StaticMasker:
    tables: MaskTables
    settings: MaskingSettings
    seed: int
    pad_id: int

    def mask(
        self, sequences: Sequence[np.ndarray], keys: Sequence[int], copies: Sequence[int]
    ) -> list[Masked]:
        """Mask every sequence (as one padded batch). `keys` are the sequences' shuffle
        keys, `copies` their dupe-factor copy numbers."""
        if not sequences:
            return []
        batch = [torch.from_numpy(np.asarray(s, dtype=np.int64)) for s in sequences]
        ids, attention = pad_batch(batch, self.pad_id)  # [B, L]
        index = torch.tensor([mask_index(k) for k in keys], dtype=torch.int64)  # [B]
        copy_of = torch.tensor(list(copies), dtype=torch.int64)  # [B]
        seq_keys = torch.empty_like(index)
        for copy in sorted(set(copies)):
            chosen = copy_of == copy
            seq_keys[chosen] = sequence_keys(self.seed, copy, index[chosen])
        result = mask_tokens(ids, attention, seq_keys, self.tables, self.settings)
        rows, cols = torch.nonzero(result.masked, as_tuple=True)  # row-major: by row, then column
        per_row = torch.bincount(rows, minlength=len(sequences)).tolist()
        positions = torch.split(cols.to(torch.int16), per_row)
        labels = torch.split(ids[rows, cols], per_row)
        out_ids = result.input_ids.numpy()
        return [
            Masked(
                tokens=out_ids[i, : len(seq)],
                positions=positions[i].numpy(),
                labels=labels[i].numpy(),
            )
            for i, seq in enumerate(sequences)
        ]
