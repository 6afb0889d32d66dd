"""Token classification (CoNLL-2003 NER and any task in its column format), as BERT's paper
fine-tunes it: each word is cut into pieces, the label goes on the first piece and the
others predict nothing (section 5.3); a word's prediction is its first piece's.

Column files: one word per line, whitespace-separated columns (the word in `text_a`, the
tag in `label`, 0-based, -1 the last), a blank line between sentences, `-DOCSTART-` lines
between documents. Words cut off by `--max-seq-len` count as predicted "O" when scoring,
so a long sentence scores what conlleval would see.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from clozeworks.corpus.vocab.fast import encoder_for
from clozeworks.schemas.errors import BadInputError
from clozeworks.trainer.finetune.encoded import Encoded, plain_copy
from clozeworks.trainer.finetune.metrics import entity_f1
from clozeworks.trainer.finetune.tasks import TaskSpec
from clozeworks.trainer.finetune.template import TEXT_A, read_template


@dataclass(frozen=True)
class Sentence:
    words: list[str]
    tags: list[int]
    line: int  # of its first word


@dataclass
class Sentences:
    path: Path
    items: list[Sentence] = field(default_factory=list)
    skipped: int = 0


def read_sentences(spec: TaskSpec, data: Path, split: str) -> Sentences:
    path = spec.path(data, split)
    if not path.is_file():
        raise BadInputError(f"{path}: no such file ({spec.name}'s {split} split)")
    labels = {label: i for i, label in enumerate(spec.labels)}
    assert isinstance(spec.text_a, int) and isinstance(spec.label, int)
    out = Sentences(path)
    words: list[str] = []
    tags: list[int] = []
    start = 0

    def flush() -> None:
        if words:
            out.items.append(Sentence(list(words), list(tags), start))
        words.clear()
        tags.clear()

    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                columns = line.split()
                if not columns:
                    flush()
                    continue
                if columns[0] == "-DOCSTART-":
                    flush()
                    continue
                try:
                    word, tag = columns[spec.text_a], columns[spec.label]
                except IndexError:
                    raise BadInputError(
                        f"{path}:{number}: {len(columns)} columns; the word is column "
                        f"{spec.text_a} and the tag column {spec.label}"
                    ) from None
                if tag not in labels:
                    raise BadInputError(
                        f"{path}:{number}: tag {tag!r} is not one of {', '.join(spec.labels)}"
                    )
                if not words:
                    start = number
                words.append(word)
                tags.append(labels[tag])
    except UnicodeDecodeError as err:
        raise BadInputError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    flush()
    if not out.items:
        raise BadInputError(f"{path}: no sentences")
    return out


def encode_sentences(tokenizer: Tokenizer, sentences: Sequence[Sentence], max_len: int) -> Encoded:
    """Each sentence's words cut into pieces one by one (as `tokenizers` does words given
    pre-split), then cut to `max_len` with the special tokens around them. The pieces come
    from the fastest exact encoder (template.py)."""
    tok = plain_copy(tokenizer)
    template = read_template(tok, pair=False)
    if template is None:
        return _encode_with_tokenizers(tok, sentences, max_len)
    flat, lengths = encoder_for(tok)([w for s in sentences for w in s.words])
    pieces = flat.tolist()
    bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()  # each word's pieces
    room = template.room(max_len)
    rows = []
    first_word = 0
    for sentence in sentences:
        last_word = first_word + len(sentence.words)
        span = pieces[bounds[first_word] : bounds[last_word]][:room]
        owners = np.repeat(np.arange(len(sentence.words)), lengths[first_word:last_word])
        first_word = last_word
        ids, types = template.fill(span)
        # Each piece's word, None on the special tokens, as `Encoding.word_ids` has it.
        word_ids: list[int | None] = []
        for part in template.parts:
            word_ids.extend(owners[:room].tolist() if part == TEXT_A else [None])
        rows.append((sentence, ids, types, word_ids))
    return _labelled(rows)


def _encode_with_tokenizers(tok: Tokenizer, sentences: Sequence[Sentence], max_len: int) -> Encoded:
    tok.enable_truncation(max_len)
    encodings = tok.encode_batch([s.words for s in sentences], is_pretokenized=True)
    return _labelled(
        [(s, e.ids, e.type_ids, e.word_ids) for s, e in zip(sentences, encodings, strict=True)]
    )


def _labelled(rows: Sequence[tuple[Sentence, list[int], list[int], list[int | None]]]) -> Encoded:
    """The label on each word's first piece, -100 on every other piece."""
    ids, types, piece_labels, first_pieces = [], [], [], []
    truncated = 0
    for sentence, row_ids, row_types, word_ids in rows:
        labels = [-100] * len(row_ids)
        first = [-1] * len(sentence.words)
        for piece, word in enumerate(word_ids):
            if word is not None and first[word] < 0:
                first[word] = piece
                labels[piece] = sentence.tags[word]
        truncated += any(f < 0 for f in first)
        ids.append(row_ids)
        types.append(row_types)
        piece_labels.append(labels)
        first_pieces.append(first)
    return Encoded(
        ids,
        types,
        np.zeros(len(rows)),
        truncated,
        piece_labels=piece_labels,
        first_pieces=first_pieces,
        word_labels=[s.tags for s, *_ in rows],
    )


def word_predictions(
    outputs: Sequence[np.ndarray], first_pieces: list[list[int]]
) -> list[list[int]]:
    """Each word's class: its first piece's argmax, class 0 ("O") where it was cut off."""
    out = []
    for logits, first in zip(outputs, first_pieces, strict=True):
        best = logits.argmax(axis=-1)
        out.append([int(best[p]) if p >= 0 else 0 for p in first])
    return out


def token_scores(spec: TaskSpec, outputs: Sequence[np.ndarray], data: Encoded) -> dict[str, float]:
    assert data.first_pieces is not None and data.word_labels is not None
    predicted = word_predictions(outputs, data.first_pieces)
    names = spec.labels
    pred_tags = [[names[c] for c in sentence] for sentence in predicted]
    gold_tags = [[names[c] for c in sentence] for sentence in data.word_labels]
    scores = entity_f1(pred_tags, gold_tags)
    words = sum(len(s) for s in predicted)
    right = sum(
        p == g
        for ps, gs in zip(predicted, data.word_labels, strict=True)
        for p, g in zip(ps, gs, strict=True)
    )
    return {
        "entity_f1": scores["f1"],
        "precision": scores["precision"],
        "recall": scores["recall"],
        "token_accuracy": 100.0 * right / max(words, 1),
    }
