"""A task split as token ids: one row per example (or QA window), with its labels; and the
encoding of sentence and pair examples (token tasks: tokens.py, QA: qa.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from clozeworks.corpus.vocab.fast import encoder_for
from clozeworks.trainer.finetune.readers import Example
from clozeworks.trainer.finetune.template import cut_pair, cuts_as_tokenizers, read_template


@dataclass
class Encoded:
    """Token ids of a split, one row per example (per option of each example for multiple
    choice), with labels."""

    # Multiple choice: `choices` rows an example, its options in order (int32 arrays).
    ids: list[list[int]] | list[np.ndarray]
    types: list[list[int]] | list[np.ndarray]
    labels: np.ndarray  # float64 [N]: the class or score (token tasks: unused zeros)
    truncated: int = 0
    # Token tasks: each piece's class, -100 where nothing is predicted (special tokens and
    # every piece of a word but its first); and each word's first piece (-1: cut off).
    piece_labels: list[list[int]] | None = None
    first_pieces: list[list[int]] | None = None
    word_labels: list[list[int]] | None = None
    choices: int = 0

    @property
    def size(self) -> int:
        """Examples (QA: windows)."""
        return len(self.ids) // (self.choices or 1)

    def rows(self, example: int) -> range:
        """The rows of `ids` that make up an example."""
        width = self.choices or 1
        return range(example * width, (example + 1) * width)

    def length(self, example: int) -> int:
        """An example's longest row."""
        return max(len(self.ids[r]) for r in self.rows(example))


def encode(tokenizer: Tokenizer, examples: Sequence[Example], max_len: int) -> Encoded:
    """[CLS] a [SEP] (b [SEP]) as the tokenizer's template makes them, cut to `max_len` by
    trimming the longer text first (BERT's `_truncate_seq_pair`, `tokenizers`'
    `longest_first`). The pieces come from the fastest exact encoder (template.py)."""
    labels = np.array([e.label for e in examples], dtype=np.float64)
    tok = plain_copy(tokenizer)
    single = read_template(tok, pair=False)
    pair = read_template(tok, pair=True) if cuts_as_tokenizers() else None
    pairs = [e.text_b is not None for e in examples]
    if single is None or (pair is None and any(pairs)):
        return _encode_with_tokenizers(tok, examples, max_len, labels)
    texts = [e.text_a for e in examples] + [e.text_b for e in examples if e.text_b is not None]
    flat, lengths = encoder_for(tok)(texts)
    starts = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    pieces = flat.tolist()
    seconds = iter(range(len(examples), len(texts)))
    ids, types = [], []
    truncated = 0
    for i, is_pair in enumerate(pairs):
        a = pieces[starts[i] : starts[i + 1]]
        if is_pair:
            assert pair is not None
            j = next(seconds)
            b = pieces[starts[j] : starts[j + 1]]
            keep_a, keep_b = cut_pair(len(a), len(b), pair.room(max_len))
            truncated += keep_a + keep_b < len(a) + len(b)
            row = pair.fill(a[:keep_a], b[:keep_b])
        else:
            keep = single.room(max_len)
            truncated += len(a) > keep
            row = single.fill(a[:keep])
        ids.append(row[0])
        types.append(row[1])
    return Encoded(ids, types, labels, truncated)


def plain_copy(tokenizer: Tokenizer) -> Tokenizer:
    """A copy without truncation or padding, so the caller's settings stay its own."""
    tok = Tokenizer.from_str(tokenizer.to_str())
    tok.no_truncation()
    tok.no_padding()
    return tok


def _encode_with_tokenizers(
    tok: Tokenizer, examples: Sequence[Example], max_len: int, labels: np.ndarray
) -> Encoded:
    tok.enable_truncation(max_len, strategy="longest_first")
    inputs: list[Any] = [e.text_a if e.text_b is None else (e.text_a, e.text_b) for e in examples]
    out = tok.encode_batch(inputs)
    truncated = sum(bool(e.overflowing) for e in out)
    return Encoded([e.ids for e in out], [e.type_ids for e in out], labels, truncated)
