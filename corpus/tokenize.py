"""Turning documents into token-id sentences with the `tokenizers` fast path."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tokenizers import Tokenizer

from corpus.sentences import split_sentences


def encode_sentences(tok: Tokenizer, sentences: Sequence[str]) -> list[np.ndarray]:
    """Ids of each sentence, without special tokens, as int64 arrays (batched in Rust)."""
    if not sentences:
        return []
    encodings = tok.encode_batch_fast(list(sentences), add_special_tokens=False)
    return [np.asarray(e.ids, dtype=np.int64) for e in encodings]


def document_sentences(tok: Tokenizer, text: str) -> list[np.ndarray]:
    """A document as a list of tokenized sentences, empty ones dropped."""
    return [s for s in encode_sentences(tok, split_sentences(text)) if len(s)]
