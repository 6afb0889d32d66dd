"""A task split as token ids: one row per example (or QA window), with its labels; and the
encoding of sentence and pair examples (token tasks: tokens.py, QA: qa.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from clozeworks.trainer.finetune.readers import Example


@dataclass
class Encoded:
    """Token ids of a split, one row per example, with labels."""

    ids: list[list[int]]
    types: list[list[int]]
    labels: np.ndarray  # float64 [N]: the class or score (token tasks: unused zeros)
    truncated: int = 0
    # Token tasks: each piece's class, -100 where nothing is predicted (special tokens and
    # every piece of a word but its first); and each word's first piece (-1: cut off).
    piece_labels: list[list[int]] | None = None
    first_pieces: list[list[int]] | None = None
    word_labels: list[list[int]] | None = None


def encode(tokenizer: Tokenizer, examples: Sequence[Example], max_len: int) -> Encoded:
    """[CLS] a [SEP] (b [SEP]) as the tokenizer's template makes them, cut to `max_len` by
    trimming the longer text first (BERT's `_truncate_seq_pair`)."""
    tok = Tokenizer.from_str(tokenizer.to_str())  # truncation settings stay local
    tok.no_padding()
    tok.enable_truncation(max_len, strategy="longest_first")
    inputs: list[Any] = [e.text_a if e.text_b is None else (e.text_a, e.text_b) for e in examples]
    out = tok.encode_batch(inputs)
    truncated = sum(bool(e.overflowing) for e in out)
    return Encoded(
        [e.ids for e in out],
        [e.type_ids for e in out],
        np.array([e.label for e in examples], dtype=np.float64),
        truncated,
    )
