"""XLNet's permutation targets (`plm`), made from a collated batch of packed rows.

XLNet predicts only the last tokens of a sampled factorization order (partial prediction,
Yang et al. 2019, section 2.3): about 1/K of them, K = 6. Which tokens those are is
span-based, as in the released code (`data_utils._sample_mask`: n-grams of up to 5 words,
p(n) proportional to 1/n): here the masking settings' `ngram` selection of whole words at
`prob` 1/6 (`corpus.shards.masking`), without replacing anything, since XLNet's inputs
stay intact. Then, as `_local_perm` with the permutation as long as the row:

- every other real, non-special token is context: order -1, seen by every position and
  seeing no target (no information leaks from a target into the context);
- targets and special tokens get their place in one uniformly random order of the row;
  a position sees the positions earlier in it (and context), a target not itself.

Fields (see docs/design.md, "Batches"): `perm_order` [B, L], `plm_positions` [B, P] (each
row's predicted positions in ascending order, -1 after), `labels` [B, P] (the token there,
-100 after), `plm_stats` [B, 2] (predicted tokens, real non-special tokens). Random
choices are counter-based hashes of the loader's (seed, epoch, sequence) key.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from clozeworks.corpus.shards.counter_rng import random_bits
from clozeworks.corpus.shards.masking import IGNORE_INDEX, MaskTables, mask_tokens
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.data.masking import DeviceTables

K = 6
# XLNet's selection: whole-word n-grams of up to 5 words at 1/K of the tokens.
XLNET_MASKING = MaskingSettings(kind="ngram", prob=1 / K, ngram_max=5)
_STREAM_ORDER = 112  # this module's (targets.py has 110, 111)


@dataclass
class PermutationTargets(DeviceTables):
    tables: MaskTables
    settings: MaskingSettings = XLNET_MASKING
    _on_device: dict[str, MaskTables] = field(default_factory=dict, repr=False)

    def __call__(self, batch: dict[str, torch.Tensor], keys: torch.Tensor) -> None:
        ids = batch["input_ids"]
        b, length = ids.shape
        tables = self._tables(ids.device)
        real = batch["attention_mask"].bool()
        keys = keys.to(ids.device)
        chosen = mask_tokens(ids, real, keys, tables, self.settings).masked  # [B, L]
        special = tables.special.index_select(0, ids.reshape(-1)).view(b, length)
        scores = random_bits(keys, length, _STREAM_ORDER)  # [B, L]
        rank = scores.argsort(1).argsort(1)  # a uniformly random order of the row
        context = real & ~special & ~chosen
        batch["perm_order"] = torch.where(context | ~real, -1, rank)
        counts = chosen.sum(1)  # [B]
        width = max(int(counts.max()) if b else 0, 1)
        at = torch.arange(length, device=ids.device)
        first = torch.where(chosen, at, length + at).argsort(1)[:, :width]  # [B, P]
        valid = torch.arange(width, device=ids.device) < counts[:, None]
        batch["plm_positions"] = torch.where(valid, first, -1)
        batch["labels"] = torch.where(
            valid, ids.gather(1, first.clamp(max=length - 1)), IGNORE_INDEX
        )
        batch["plm_stats"] = torch.stack([counts, (real & ~special).sum(1)], 1)
