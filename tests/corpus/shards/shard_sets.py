"""Small shard sets for the inspection tests, written directly with corpus.shards.blocks.

Sequences are real token ids (stdlib docstrings encoded with a WordPiece vocabulary trained
here), laid out as docs/design.md says: `[CLS] A [SEP] B [SEP]` with segments and labels in
pair modes, `[CLS] ... [SEP]` otherwise; pre-masked sets carry BERT's 80/10/10 masking
with the positions and original ids. Lengths are skewed (many short, a spike at the
maximum) so padding and quantiles have something to measure.
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import numpy as np

from clozeworks.corpus.shards.blocks import make_block, write_blocks, write_manifest
from clozeworks.corpus.text.demo import iter_docstrings
from clozeworks.corpus.vocab.train import (
    TokenizerInfo,
    VocabConfig,
    copy_tokenizer_dir,
    load_tokenizer,
    save_tokenizer,
    train_tokenizer,
)
from clozeworks.schemas.kinds import PAIR_MODES
from clozeworks.schemas.manifest import Manifest, token_dtype_for
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.schemas.sidecars import TOKENIZER_DIR

UNK_PROB = 0.003


def make_tokenizer(directory: Path, vocab_size: int = 1200, docs: int = 600) -> TokenizerInfo:
    config = VocabConfig(kind="wordpiece", vocab_size=vocab_size)
    texts = [d["text"] for d in islice(iter_docstrings(), docs)]
    save_tokenizer(train_tokenizer(texts, config), config, directory)
    return load_tokenizer(directory)


def token_stream(info: TokenizerInfo, docs: int = 600) -> np.ndarray:
    """Content ids of the first `docs` docstrings, back to back, no special tokens."""
    texts = [d["text"] for d in islice(iter_docstrings(), docs)]
    encoded = info.tokenizer.encode_batch(texts, add_special_tokens=False)
    return np.concatenate([np.asarray(e.ids, dtype=np.int64) for e in encoded])


class _Source:
    def __init__(self, stream: np.ndarray, rng: np.random.Generator, unk: int) -> None:
        self.stream, self.rng, self.unk, self.at = stream, rng, unk, 0

    def take(self, n: int) -> np.ndarray:
        if self.at + n > len(self.stream):
            self.at = 0
        out = self.stream[self.at : self.at + n].copy()
        self.at += n
        out[self.rng.random(n) < UNK_PROB] = self.unk
        return out


def _length(rng: np.random.Generator, lo: int, hi: int) -> int:
    # A quarter at the maximum (packed sequences), the rest skewed towards short.
    if rng.random() < 0.25:
        return hi
    return int(lo + (hi - lo) * rng.random() ** 2)


def make_sequences(
    info: TokenizerInfo, stream: np.ndarray, mode: str, count: int, max_len: int, seed: int
) -> list[tuple[np.ndarray, int | None, int | None]]:
    """`count` (ids, segment A length or None, label or None) tuples."""
    rng = np.random.default_rng(seed)
    ids = info.special_ids
    src = _Source(stream, rng, ids["unk"])
    out: list[tuple[np.ndarray, int | None, int | None]] = []
    for _ in range(count):
        if mode in PAIR_MODES:
            total = _length(rng, 8, max_len) - 3
            a = int(rng.integers(1, total))
            seq = np.concatenate(
                [[ids["cls"]], src.take(a), [ids["sep"]], src.take(total - a), [ids["sep"]]]
            )
            # NSP/SOP: 30% negatives, so a balance check has something to find.
            label = int(rng.integers(0, 3)) if mode == "sso" else int(rng.random() < 0.3)
            out.append((seq, a + 2, label))
        else:
            n = _length(rng, 4, max_len) - 2
            out.append((np.concatenate([[ids["cls"]], src.take(n), [ids["sep"]]]), None, None))
    return out


def premask(
    info: TokenizerInfo, seq: np.ndarray, rng: np.random.Generator, prob: float = 0.15
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """BERT masking: the masked input and (positions, original ids)."""
    special = np.isin(seq, info.all_special_ids) & (seq != info.special_ids["unk"])
    candidates = np.flatnonzero(~special)
    n = max(1, round(prob * len(candidates)))
    positions = np.sort(rng.choice(candidates, size=n, replace=False))
    masked = seq.copy()
    first_ordinary = max(info.all_special_ids) + 1
    for p in positions:
        u = rng.random()
        if u < 0.8:
            masked[p] = info.special_ids["mask"]
        elif u < 0.9:
            replacement = seq[p]
            while replacement == seq[p]:
                replacement = rng.integers(first_ordinary, info.vocab_size)
            masked[p] = replacement
    return masked, (positions, seq[positions])


def write_shard_set(
    directory: Path,
    info: TokenizerInfo,
    stream: np.ndarray,
    mode: str = "full-sentences",
    premasked: bool = False,
    shards: int = 3,
    sequences: int = 700,
    max_len: int = 64,
    block_size: int = 64,
    seed: int = 0,
) -> Manifest:
    """A complete shard set (shards, tokenizer copy, manifest) in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed + 1)
    dtype = token_dtype_for(info.vocab_size)
    items = make_sequences(info, stream, mode, sequences, max_len, seed)
    infos = []
    start = 0
    for index in range(shards):
        size = sequences // shards + (index < sequences % shards)
        mine = items[start : start + size]
        start += size
        blocks = []
        for lo in range(0, len(mine), block_size):
            chunk = mine[lo : lo + block_size]
            seqs = [s for s, _, _ in chunk]
            predictions = None
            if premasked:
                done = [premask(info, s, rng) for s in seqs]
                seqs = [m for m, _ in done]
                predictions = [p for _, p in done]
            pair = mode in PAIR_MODES
            blocks.append(
                make_block(
                    seqs,
                    dtype,
                    segments=[a for _, a, _ in chunk] if pair else None,
                    labels=[lab for _, _, lab in chunk] if pair else None,
                    predictions=predictions,
                )
            )
        infos.append(write_blocks(directory, index, dtype, blocks))
    copy_tokenizer_dir(info, directory / TOKENIZER_DIR)
    manifest = Manifest(
        mode=mode,  # type: ignore[arg-type]
        max_seq_len=max_len,
        vocab_size=info.vocab_size,
        vocab_kind=info.kind,
        tokenizer_sha256=info.sha256,
        special_tokens=dict(info.special_ids),
        seed=seed,
        shards=tuple(infos),
        block_size=block_size,
        token_dtype=dtype,
        premask=MaskingSettings() if premasked else None,
        created_by="tests",
    )
    write_manifest(directory, manifest)
    return manifest
