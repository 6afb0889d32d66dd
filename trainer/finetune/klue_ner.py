"""KLUE-NER: named entities tagged per character, as KLUE releases them, carried to the
tokenizer's pieces for training and back to characters for scoring, as KLUE-baseline does
(`klue_baseline/data/klue_ner.py`, `models/named_entity_recognition.py`), for any
tokenizer (the baseline's code knows two: BERT's WordPiece and XLM-R's SentencePiece).

- The files: `## ...` comment lines (the file's header, then each sentence's id and its
  inline-tagged text), then one `character<TAB>tag` line per character of the sentence,
  spaces included (tagged O), and a blank line between sentences.
- Pieces: the sentence is encoded whole; each piece takes the tag of its first character
  that is not a space (a piece of no character, such as a lone `▁`, and the special
  tokens take O, as the baseline's).
- Back to characters: a character takes the prediction of the first piece that covers it;
  after that piece's first character, B-X and I-X become I-X. Characters past
  `--max-seq-len` are left out of the score, and each sentence is scored between its
  [CLS] and last special token's predictions against O, as the baseline does, so that
  entities of neighbouring sentences never join.
- Scores: KLUE's entity-level (seqeval strict) and character-level macro F1 over the
  whole split (klue_metrics.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from clozeworks.schemas.errors import BadInputError
from clozeworks.trainer.finetune import klue_metrics
from clozeworks.trainer.finetune.encoded import Encoded, plain_copy
from clozeworks.trainer.finetune.tasks import TaskSpec


@dataclass(frozen=True)
class CharSentence:
    text: str
    tags: list[int]  # one per character of `text`, spaces included
    line: int  # of its first character


@dataclass
class CharSentences:
    path: Path
    items: list[CharSentence] = field(default_factory=list)


@dataclass
class CharEncoded(Encoded):
    # Per sentence, for each character that is not a space: the piece that predicts it
    # (-1: cut off), whether it follows that piece's first character, and its gold tag.
    owners: list[np.ndarray] = field(default_factory=list)
    inner: list[np.ndarray] = field(default_factory=list)
    gold: list[np.ndarray] = field(default_factory=list)


def read_char_sentences(spec: TaskSpec, data: Path, split: str) -> CharSentences:
    path = spec.path(data, split)
    if not path.is_file():
        raise BadInputError(f"{path}: no such file ({spec.name}'s {split} split)")
    labels = {label: i for i, label in enumerate(spec.labels)}
    out = CharSentences(path)
    chars: list[str] = []
    tags: list[int] = []
    start = 0

    def flush() -> None:
        if chars:
            out.items.append(CharSentence("".join(chars), list(tags), start))
        chars.clear()
        tags.clear()

    try:
        with path.open(encoding="utf-8", newline="") as lines:
            for number, raw in enumerate(lines, start=1):
                line = raw.rstrip("\r\n")
                if not line.strip("\t"):  # the baseline splits sentences at \n\t?\n
                    flush()
                    continue
                if line.startswith("##"):
                    continue
                parts = line.split("\t")
                if len(parts) != 2 or len(parts[0]) != 1:
                    raise BadInputError(
                        f"{path}:{number}: not one character, a tab and its tag: {line[:40]!r}"
                    )
                if parts[1] not in labels:
                    raise BadInputError(
                        f"{path}:{number}: tag {parts[1]!r} is not one of {', '.join(spec.labels)}"
                    )
                if not chars:
                    start = number
                chars.append(parts[0])
                tags.append(labels[parts[1]])
    except UnicodeDecodeError as err:
        raise BadInputError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    flush()
    if not out.items:
        raise BadInputError(f"{path}: no sentences")
    return out


def encode_char_sentences(
    tokenizer: Tokenizer, sentences: Sequence[CharSentence], max_len: int, outside: int
) -> CharEncoded:
    """Each sentence encoded whole (character offsets need `tokenizers` itself), cut to
    `max_len`; `outside` is the id of the O tag."""
    tok = plain_copy(tokenizer)
    tok.enable_truncation(max_len)
    encodings = tok.encode_batch([s.text for s in sentences])
    out = CharEncoded([], [], np.zeros(len(sentences)), piece_labels=[])
    assert out.piece_labels is not None
    for sentence, e in zip(sentences, encodings, strict=True):
        text = sentence.text
        owners = np.full(len(text), -1, dtype=np.int64)
        inner = np.zeros(len(text), dtype=bool)
        labels = [outside] * len(e.ids)
        for piece, ((begin, end), sequence) in enumerate(
            zip(e.offsets, e.sequence_ids, strict=True)
        ):
            if sequence is None:
                continue
            spelled = [c for c in range(begin, end) if not text[c].isspace()]
            if not spelled:
                continue
            labels[piece] = sentence.tags[spelled[0]]
            for c in spelled:
                if owners[c] < 0:
                    owners[c], inner[c] = piece, c != spelled[0]
        keep = np.array([not c.isspace() for c in text], dtype=bool)
        out.truncated += bool((owners[keep] < 0).any())
        out.ids.append(e.ids)
        out.types.append(e.type_ids)
        out.piece_labels.append(labels)
        out.owners.append(owners[keep])
        out.inner.append(inner[keep])
        out.gold.append(np.asarray(sentence.tags)[keep])
    return out


def character_tags(
    spec: TaskSpec, outputs: Sequence[np.ndarray], data: CharEncoded
) -> tuple[list[str], list[str]]:
    """The predicted and gold tags of the split as one sequence each: per sentence, its
    first and last piece's prediction against O around the characters it reaches."""
    names = spec.labels
    predicted: list[str] = []
    gold: list[str] = []
    for logits, owners, inner, tags in zip(
        outputs, data.owners, data.inner, data.gold, strict=True
    ):
        best = logits.argmax(axis=-1)
        reached = owners >= 0
        chars = [names[int(best[p])] for p in owners[reached]]
        for i, within in enumerate(inner[reached]):
            if within and chars[i] != "O":
                chars[i] = "I-" + chars[i].partition("-")[2]
        predicted += [names[int(best[0])], *chars, names[int(best[-1])]]
        gold += ["O", *(names[int(t)] for t in tags[reached]), "O"]
    return predicted, gold


def klue_ner_scores(
    spec: TaskSpec, outputs: Sequence[np.ndarray], data: Encoded
) -> dict[str, float]:
    assert isinstance(data, CharEncoded)
    predicted, gold = character_tags(spec, outputs, data)
    index = {name: i for i, name in enumerate(spec.labels)}
    scores = {
        "klue_entity_f1": klue_metrics.ner_entity_macro_f1(predicted, gold),
        "klue_char_f1": klue_metrics.ner_char_macro_f1(
            [index[t] for t in predicted], [index[t] for t in gold], len(spec.labels)
        ),
    }
    return {name: scores[name] for name in spec.metrics}
