"""Small shard sets written with the real shard writer, for loader tests.

Sequence i (global index, in manifest order) is `[CLS] hi lo body... [SEP]` where (hi, lo)
encode i, so a test can tell which sequence a batch row is: `sequence_ids(batch)`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import torch

from clozeworks.corpus.shards.blocks import make_block, write_blocks, write_manifest
from clozeworks.schemas.manifest import Manifest
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.schemas.sidecars import TOKENIZER_DIR

CLS, SEP, MASK = 2, 3, 4
FIRST = 5  # first ordinary id
BASE = 1000


def make_shards(
    directory: Path,
    sizes: list[int],
    tokenizer_dir: Path,
    block_size: int = 16,
    max_len: int = 48,
    mode: str = "full-sentences",
    premask: bool = False,
    seed: int = 0,
) -> Manifest:
    """Write shards of `sizes` sequences each into `directory`, with a manifest and a copy
    of `tokenizer_dir` (vocab 2000, as the session's small build)."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copytree(tokenizer_dir, directory / TOKENIZER_DIR, dirs_exist_ok=True)
    tok_json = (directory / TOKENIZER_DIR / "tokenizer.json").read_bytes()
    import hashlib

    rng = np.random.default_rng(seed)
    pair = mode in ("nsp", "sop", "sso")
    infos = []
    index = 0
    for shard, size in enumerate(sizes):
        blocks = []
        for start in range(0, size, block_size):
            n = min(block_size, size - start)
            seqs, segments, labels, preds = [], [], [], []
            for _ in range(n):
                length = int(rng.integers(8, max_len + 1))
                body = rng.integers(FIRST, 2000, size=length - 2)
                body[0], body[1] = FIRST + index // BASE, FIRST + index % BASE
                seq = np.concatenate([[CLS], body, [SEP]])
                if pair:
                    seg = int(rng.integers(4, length - 2))
                    seq[seg - 1] = SEP
                    segments.append(seg)
                    labels.append(int(rng.integers(0, 3 if mode == "sso" else 2)))
                if premask:
                    pos = np.sort(rng.choice(np.arange(3, length - 1), size=3, replace=False))
                    preds.append((pos, seq[pos].copy()))
                    seq[pos] = MASK
                seqs.append(seq)
                index += 1
            blocks.append(
                make_block(
                    seqs,
                    "uint16",
                    segments=segments if pair else None,
                    labels=labels if pair else None,
                    predictions=preds if premask else None,
                )
            )
        infos.append(write_blocks(directory, shard, "uint16", blocks))
    manifest = Manifest(
        mode=mode,  # type: ignore[arg-type]
        max_seq_len=max_len,
        vocab_size=2000,
        vocab_kind="wordpiece",
        tokenizer_sha256=hashlib.sha256(tok_json).hexdigest(),
        special_tokens={"pad": 0, "unk": 1, "cls": CLS, "sep": SEP, "mask": MASK},
        seed=seed,
        shards=tuple(infos),
        block_size=block_size,
        premask=MaskingSettings() if premask else None,
    )
    write_manifest(directory, manifest)
    return manifest


def sequence_ids(batch: dict[str, torch.Tensor]) -> list[int]:
    """The global index of every row, read from its (unmasked) tokens 1 and 2."""
    ids = batch["input_ids"]
    if "labels" in batch:
        ids = torch.where(batch["labels"] >= 0, batch["labels"], ids)
    return ((ids[:, 1] - FIRST) * BASE + (ids[:, 2] - FIRST)).tolist()
