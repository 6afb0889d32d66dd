"""Relation extraction with entity markers (KLUE-RE), as KLUE-baseline does it
(`klue_baseline/data/klue_re.py`): the subject and the object are marked in the sentence
with `<subj> </subj>` and `<obj> </obj>`, four special tokens added to the tokenizer (and
rows added to the model's word embeddings where it has no room for them), and the marked
sentence is classified from its first token like any sentence.

- A record's entities are objects with `start_idx` and `end_idx` (inclusive character
  offsets into the sentence) and `word` (the text there, checked).
- The text after an end marker is encoded as the start of a word; where it is not (no
  space after the entity, as a Korean particle: `</subj>가`) and the vocabulary is
  WordPiece, its first piece is put back to the word-continuing form it has in the
  unmarked sentence (`##가`), as the baseline's `fix_tokenization_error` does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from tokenizers import AddedToken, Tokenizer
from torch import nn

from clozeworks.trainer.finetune.encoded import Encoded, plain_copy
from clozeworks.trainer.finetune.markers import MARKERS


def with_markers(tokenizer: Tokenizer) -> Tokenizer:
    """A copy of `tokenizer` that knows the markers as special tokens."""
    tok = Tokenizer.from_str(tokenizer.to_str())
    tok.add_special_tokens([AddedToken(m, special=True) for pair in MARKERS for m in pair])
    return tok


def encode_marked(
    tokenizer: Tokenizer, texts: Sequence[str], labels: np.ndarray, max_len: int
) -> Encoded:
    """`[CLS] marked sentence [SEP]` cut to `max_len`, continuing pieces after an end
    marker put back (WordPiece)."""
    tok = plain_copy(tokenizer)
    tok.enable_truncation(max_len)
    model = tok.model
    wordpiece = type(model).__name__ == "WordPiece"
    prefix = getattr(model, "continuing_subword_prefix", None) if wordpiece else None
    vocab = tok.get_vocab() if prefix else {}
    closing = {tok.token_to_id(pair[1]) for pair in MARKERS}
    ids, types, truncated = [], [], 0
    for e in tok.encode_batch(list(texts)):
        row = list(e.ids)
        for i in range(1, len(row)):
            if prefix and e.ids[i - 1] in closing and e.sequence_ids[i] is not None:
                attached = e.offsets[i][0] == e.offsets[i - 1][1]  # no space between
                token = e.tokens[i]
                if attached and not token.startswith(prefix) and prefix + token in vocab:
                    row[i] = vocab[prefix + token]
        ids.append(row)
        types.append(e.type_ids)
        truncated += bool(e.overflowing)
    return Encoded(ids, types, labels, truncated)


def grow_embeddings(word: nn.Embedding, rows: int, std: float) -> nn.Embedding:
    """`word` with at least `rows` rows: the old ones kept, new ones drawn as BERT
    initializes them (normal(0, std))."""
    if word.num_embeddings >= rows:
        return word
    grown = nn.Embedding(rows, word.embedding_dim)
    with torch.no_grad():
        grown.weight.normal_(0.0, std)
        grown.weight[: word.num_embeddings] = word.weight
    return grown
