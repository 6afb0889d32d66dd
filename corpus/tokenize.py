"""Turning documents into token-id sentences with the `tokenizers` fast path.

Many documents are encoded in one `encode_batch_fast` call (Rust, all cores, no offsets),
and the ids come back as one flat array per document with sentence boundaries beside it,
which is what the instance builders read and what travels cheaply between Beam stages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
from tokenizers import Tokenizer

from corpus.sentences import DEFAULT_LANGUAGE, split_sentences

ID_DTYPE = np.int32


@dataclass(frozen=True)
class TokenizedDoc:
    """One document: `ids` of every sentence concatenated, sentence i is
    `ids[bounds[i]:bounds[i + 1]]`. No sentence is empty."""

    ids: np.ndarray
    bounds: np.ndarray

    def __len__(self) -> int:
        return len(self.bounds) - 1

    @property
    def num_tokens(self) -> int:
        return int(self.bounds[-1])

    def sentences(self) -> list[np.ndarray]:
        b = self.bounds
        return [self.ids[b[i] : b[i + 1]] for i in range(len(b) - 1)]


def encode_sentences(tok: Tokenizer, sentences: Sequence[str]) -> list[np.ndarray]:
    """Ids of each sentence, without special tokens, as int64 arrays (batched in Rust)."""
    if not sentences:
        return []
    encodings = tok.encode_batch_fast(list(sentences), add_special_tokens=False)
    return [np.asarray(e.ids, dtype=np.int64) for e in encodings]


def tokenize_documents(
    tok: Tokenizer,
    texts: Sequence[str],
    split: bool = True,
    language: str = DEFAULT_LANGUAGE,
) -> list[TokenizedDoc]:
    """Every text as a `TokenizedDoc`, in order, with one `encode_batch_fast` call.

    `split=False` keeps each text as a single "sentence" (modes that ignore sentence
    boundaries). Sentences that encode to no token are dropped; a text with no token gives
    an empty document (zero sentences).
    """
    pieces: list[str] = []
    per_doc: list[int] = []
    for text in texts:
        parts = split_sentences(text, language) if split else ([text] if text.strip() else [])
        pieces.extend(parts)
        per_doc.append(len(parts))
    if not pieces:
        return [_empty() for _ in texts]
    id_lists = [e.ids for e in tok.encode_batch_fast(pieces, add_special_tokens=False)]
    lengths = np.fromiter(map(len, id_lists), dtype=np.int64, count=len(id_lists))
    flat = np.fromiter(chain.from_iterable(id_lists), dtype=ID_DTYPE, count=int(lengths.sum()))
    ends = np.cumsum(lengths)
    docs: list[TokenizedDoc] = []
    first = 0
    for count in per_doc:
        lens = lengths[first : first + count]
        lo = int(ends[first] - lens[0]) if count else 0
        hi = int(ends[first + count - 1]) if count else 0
        kept = lens[lens > 0]
        bounds = np.zeros(len(kept) + 1, dtype=np.int64)
        np.cumsum(kept, out=bounds[1:])
        docs.append(TokenizedDoc(flat[lo:hi].copy(), bounds))
        first += count
    return docs


def _empty() -> TokenizedDoc:
    return TokenizedDoc(np.zeros(0, dtype=ID_DTYPE), np.zeros(1, dtype=np.int64))


def document_sentences(tok: Tokenizer, text: str) -> list[np.ndarray]:
    """A document as a list of tokenized sentences, empty ones dropped."""
    return tokenize_documents(tok, [text])[0].sentences()
