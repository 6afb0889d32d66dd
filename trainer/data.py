"""The streaming loader: shards -> shuffled, padded, dynamically masked batches.

```python
from trainer.data import ShardDataset, MaskingConfig
ds = ShardDataset("shards/", batch_size=64, seed=0, masking=MaskingConfig(kind="token"))
loader = ds.loader()
for batch in loader: ...          # one epoch; the next `for` continues with the next epoch
state = loader.state_dict(); loader.load_state_dict(state)
```

Batches are dicts of tensors named as Hugging Face models take them. Masks come from
`corpus.masking` keyed by (seed, epoch, global sequence index), so they do not depend on
batching. This first version runs in the calling process (`num_workers=0`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from corpus.masking import MaskTables, mask_tokens, pad_batch, sequence_keys
from corpus.shardio import Block, iter_blocks
from corpus.vocab import load_tokenizer
from schemas.errors import BadInputError, UsageError
from schemas.manifest import TOKENIZER_DIR, Manifest, read_manifest
from schemas.masking import MaskingSettings

MaskingConfig = MaskingSettings

SENTENCE_LABEL_NAMES = {
    "nsp": "next_sentence_label",
    "sop": "sentence_order_label",
    "sso": "sentence_order_label",
}


@dataclass(frozen=True)
class Example:
    index: int  # global sequence index: position in the manifest's shard order
    tokens: np.ndarray
    segment: int = -1
    label: int = -1


class ShardDataset:
    def __init__(
        self,
        source: str | Path,
        batch_size: int,
        seed: int = 0,
        masking: MaskingSettings | None = None,
        rank: int = 0,
        world_size: int = 1,
        shuffle_buffer: int = 8192,
        tokenizer_sha256: str | None = None,
    ) -> None:
        self.source = Path(source)
        self.manifest: Manifest = read_manifest(self.source)
        if tokenizer_sha256 is not None and tokenizer_sha256 != self.manifest.tokenizer_sha256:
            raise BadInputError(
                f"{self.source}: shards were encoded with a different tokenizer "
                f"({self.manifest.tokenizer_sha256[:12]} vs {tokenizer_sha256[:12]})"
            )
        if world_size != 1 or rank != 0:
            raise UsageError("this loader runs on one process; multi-rank loading comes later")
        if batch_size < 1:
            raise UsageError(f"batch size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self.seed = seed
        self.masking = masking or MaskingSettings()
        self.shuffle_buffer = shuffle_buffer
        self.tables = _mask_tables(self.source, self.manifest)
        self.first_index = np.cumsum([0] + [s.sequences for s in self.manifest.shards])

    def loader(self, num_workers: int = 0) -> ShardLoader:
        if num_workers != 0:
            raise UsageError("this loader runs in the training process; use num_workers=0")
        return ShardLoader(self)

    def batches_per_epoch(self) -> int:
        return self.manifest.sequences // self.batch_size

    # One epoch as a stream of examples, in shuffled order.
    def examples(self, epoch: int) -> Iterator[Example]:
        rng = np.random.default_rng([self.seed, epoch, 0x5EED])
        order = rng.permutation(len(self.manifest.shards))
        buffer: list[Example] = []
        for shard_pos in order:
            shard = self.manifest.shards[shard_pos]
            first = int(self.first_index[shard_pos])
            seen = 0
            for _, block in iter_blocks(self.source / shard.name):
                for example in _examples(block, first + seen):
                    if len(buffer) < self.shuffle_buffer:
                        buffer.append(example)
                        continue
                    j = int(rng.integers(len(buffer)))
                    buffer[j], example = example, buffer[j]
                    yield example
                seen += len(block)
        rng.shuffle(buffer)  # type: ignore[arg-type]
        yield from buffer

    def collate(self, examples: list[Example], epoch: int) -> dict[str, torch.Tensor]:
        seqs = [torch.from_numpy(e.tokens.astype(np.int64)) for e in examples]
        ids, attention = pad_batch(seqs, self.manifest.special_tokens["pad"])
        batch: dict[str, torch.Tensor] = {"attention_mask": attention.to(torch.int64)}
        positions = torch.arange(ids.shape[1])
        segments = torch.tensor([e.segment for e in examples])
        batch["token_type_ids"] = (
            ((positions[None, :] >= segments[:, None]) & attention).to(torch.int64)
            if self.manifest.is_pair_mode
            else torch.zeros_like(ids)
        )
        keys = sequence_keys(self.seed, epoch, torch.tensor([e.index for e in examples]))
        result = mask_tokens(ids, attention, keys, self.tables, self.masking)
        batch["input_ids"] = result.input_ids
        batch["labels"] = result.labels
        if self.manifest.is_pair_mode:
            name = SENTENCE_LABEL_NAMES[self.manifest.mode]
            batch[name] = torch.tensor([e.label for e in examples], dtype=torch.int64)
        return batch


def _examples(block: Block, first: int) -> Iterator[Example]:
    for i in range(len(block)):
        yield Example(
            index=first + i,
            tokens=block.sequence(i),
            segment=-1 if block.segments is None else int(block.segments[i]),
            label=-1 if block.labels is None else int(block.labels[i]),
        )


def _mask_tables(source: Path, manifest: Manifest) -> MaskTables:
    tok_dir = source / TOKENIZER_DIR
    special = list(manifest.special_tokens.values())
    word_start = None
    if tok_dir.is_dir():
        info = load_tokenizer(tok_dir)
        special = sorted(set(special) | set(info.all_special_ids))
        word_start = info.word_start_table()
    return MaskTables.build(
        manifest.vocab_size, special, word_start, manifest.special_tokens["mask"]
    )


class ShardLoader:
    """Iterates one epoch per `for`; `state_dict()` is where the next batch comes from."""

    def __init__(self, dataset: ShardDataset) -> None:
        self.dataset = dataset
        self.epoch = 0
        self.batches = 0  # batches already yielded in the current epoch

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        ds = self.dataset
        epoch, skip = self.epoch, self.batches
        pending: list[Example] = []
        produced = 0
        for example in ds.examples(epoch):
            pending.append(example)
            if len(pending) < ds.batch_size:
                continue
            batch_examples, pending = pending, []
            produced += 1
            if produced <= skip:
                continue
            self.batches = produced
            yield ds.collate(batch_examples, epoch)
        # The short last batch is dropped: every epoch has the same number of batches.
        self.epoch, self.batches = epoch + 1, 0

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "batches": self.batches, "seed": self.dataset.seed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("seed") != self.dataset.seed:
            raise UsageError("loader state was saved with a different seed")
        self.epoch = int(state["epoch"])
        self.batches = int(state["batches"])
