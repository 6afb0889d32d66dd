"""Extractive question answering (SQuAD v1.1 and v2.0), as BERT's `run_squad.py` does it.

- Each question is paired with its context: `[CLS] question [SEP] context [SEP]`, the
  question cut to 64 tokens, the context in windows of `--max-seq-len` (384 for SQuAD in
  the paper; 128 here by default) that overlap by a stride of 128 tokens (or half the room
  a window has for context, if that is less).
- Training labels: the answer's first and last token in a window that holds the whole
  answer, else the [CLS] position (0), which is also the label of an unanswerable
  question (v2.0). An answer whose `answer_start` does not point at its text in the
  context is counted and left out of training, as BERT's code does ("Could not find
  answer").
- Prediction, per question over its windows: the 20 best start and 20 best end positions
  inside the context, end not before start, at most 30 tokens long, scored start + end;
  the answer is the context text between the two tokens' character offsets. v2.0: the
  null score is the lowest [CLS] start + end over the windows, and the answer is empty
  when it beats the best span's score (threshold 0, as BERT's default).
- Scores: SQuAD's exact match and F1 (metrics.squad_scores); KLUE-MRC's exact match and
  character ROUGE-W (klue_metrics.mrc_scores). KLUE-MRC's files are SQuAD 2.0's layout
  with the id in `guid`; KLUE-baseline decodes them with transformers' SQuAD pipeline,
  this same procedure (null score, threshold 0).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from clozeworks.schemas.errors import BadInputError
from clozeworks.schemas.validate import loads
from clozeworks.trainer.finetune import klue_metrics
from clozeworks.trainer.finetune.encoded import Encoded
from clozeworks.trainer.finetune.metrics import squad_scores
from clozeworks.trainer.finetune.tasks import TaskSpec

MAX_QUESTION_TOKENS = 64
DOC_STRIDE = 128
N_BEST = 20
MAX_ANSWER_TOKENS = 30
# A question's id: SQuAD's field, KLUE-MRC's.
ID_FIELDS = ("id", "guid")


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    context: str
    answers: tuple[str, ...]  # every gold text; () when unanswerable
    start: int  # character offset of the first answer (-1: none or unanswerable)


@dataclass
class Questions:
    path: Path
    items: list[Question] = field(default_factory=list)
    unfound: int = 0  # answers whose answer_start does not point at their text


@dataclass
class QAEncoded(Encoded):
    """Windows of questions: `labels` [W, 2] start and end token; for each window its
    question and the character span of each token in the context ((0, 0) outside it)."""

    window_question: list[int] = field(default_factory=list)
    offsets: list[list[tuple[int, int]]] = field(default_factory=list)
    in_context: list[list[bool]] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def _field(record: Any, key: str, kind: type, where: str) -> Any:
    if not isinstance(record, dict) or not isinstance(record.get(key), kind):
        raise BadInputError(f"{where}: no {kind.__name__} field {key!r}")
    return record[key]


def read_questions(spec: TaskSpec, data: Path, split: str) -> Questions:
    path = spec.path(data, split)
    if not path.is_file():
        raise BadInputError(f"{path}: no such file ({spec.name}'s {split} split)")
    try:
        raw = loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BadInputError(f"{path}: not SQuAD JSON ({err})") from None
    out = Questions(path)
    for a, article in enumerate(_field(raw, "data", list, str(path))):
        for p, paragraph in enumerate(_field(article, "paragraphs", list, f"{path}: data[{a}]")):
            where = f"{path}: data[{a}].paragraphs[{p}]"
            context = _field(paragraph, "context", str, where)
            for q, qa in enumerate(_field(paragraph, "qas", list, where)):
                here = f"{where}.qas[{q}]"
                ids = [qa[k] for k in ID_FIELDS if isinstance(qa, dict) and k in qa]
                if not ids or not isinstance(ids[0], str):
                    raise BadInputError(f"{here}: no str field {' or '.join(ID_FIELDS)}")
                qid = ids[0]
                question = _field(qa, "question", str, f"{path}: question {qid}")
                answers = _field(qa, "answers", list, f"{path}: question {qid}")
                impossible = bool(qa.get("is_impossible", False))
                texts = tuple(
                    _field(x, "text", str, f"{path}: question {qid} answer") for x in answers
                )
                start = -1
                if texts and not impossible:
                    start = _field(answers[0], "answer_start", int, f"{path}: question {qid}")
                    if context[start : start + len(texts[0])] != texts[0]:
                        out.unfound += 1
                        start = -2
                if not texts and not impossible:
                    raise BadInputError(f"{path}: question {qid} has no answer")
                out.items.append(
                    Question(qid, question, context, () if impossible else texts, start)
                )
    if not out.items:
        raise BadInputError(f"{path}: no questions")
    return out


def encode_questions(
    tokenizer: Tokenizer, questions: Sequence[Question], max_len: int
) -> QAEncoded:
    plain = Tokenizer.from_str(tokenizer.to_str())
    plain.no_padding()
    plain.no_truncation()
    out = QAEncoded([], [], np.zeros((0, 2)))
    labels: list[tuple[int, int]] = []
    for index, q in enumerate(questions):
        question = q.question
        asked = plain.encode(question, add_special_tokens=False)
        if len(asked.ids) > MAX_QUESTION_TOKENS:
            question = question[: asked.offsets[MAX_QUESTION_TOKENS - 1][1]]
            out.truncated += 1
        room = max_len - len(plain.encode(question, add_special_tokens=False).ids) - 3
        if room < 2:
            raise BadInputError(
                f"question {q.id}: --max-seq-len {max_len} leaves no room for context"
            )
        stride = min(DOC_STRIDE, room // 2)
        tok = Tokenizer.from_str(tokenizer.to_str())
        tok.no_padding()
        tok.enable_truncation(max_len, stride=stride, strategy="only_second")
        first = tok.encode(question, q.context)
        for window in [first, *first.overflowing]:
            sequence = window.sequence_ids
            inside = [s == 1 for s in sequence]
            offsets = [o if inside[i] else (0, 0) for i, o in enumerate(window.offsets)]
            labels.append(_label(q, offsets, inside))
            out.ids.append(window.ids)
            out.types.append(window.type_ids)
            out.window_question.append(index)
            out.offsets.append(offsets)
            out.in_context.append(inside)
    out.labels = np.array(labels, dtype=np.float64).reshape(-1, 2)
    out.questions = list(questions)
    return out


def _label(q: Question, offsets: list[tuple[int, int]], inside: list[bool]) -> tuple[int, int]:
    """The answer's first and last token in this window, or (0, 0): [CLS]."""
    if q.start < 0:
        return 0, 0
    begin, end = q.start, q.start + len(q.answers[0])
    tokens = [i for i, ok in enumerate(inside) if ok]
    if not tokens or offsets[tokens[0]][0] > begin or offsets[tokens[-1]][1] < end:
        return 0, 0
    first = next(i for i in tokens if offsets[i][1] > begin)
    last = next(i for i in reversed(tokens) if offsets[i][0] < end)
    return first, last


def trainable(data: QAEncoded) -> QAEncoded:
    """The windows of questions whose answer was found in the context."""
    keep = [w for w, q in enumerate(data.window_question) if data.questions[q].start != -2]
    return QAEncoded(
        [data.ids[w] for w in keep],
        [data.types[w] for w in keep],
        data.labels[keep],
        data.truncated,
        window_question=[data.window_question[w] for w in keep],
        offsets=[data.offsets[w] for w in keep],
        in_context=[data.in_context[w] for w in keep],
        questions=data.questions,
    )


def answers(outputs: Sequence[np.ndarray], data: QAEncoded, allow_null: bool) -> list[str]:
    """The predicted answer text of every question (see the module's docstring)."""
    best: list[tuple[float, str]] = [(-np.inf, "")] * len(data.questions)
    null = [np.inf] * len(data.questions)
    for w, logits in enumerate(outputs):  # [L, 2]
        q = data.window_question[w]
        start, end = logits[:, 0], logits[:, 1]
        null[q] = min(null[q], float(start[0] + end[0]))
        inside = np.asarray(data.in_context[w])
        starts = [i for i in np.argsort(-start) if inside[i]][:N_BEST]
        ends = [i for i in np.argsort(-end) if inside[i]][:N_BEST]
        offsets = data.offsets[w]
        context = data.questions[q].context
        for s in starts:
            for e in ends:
                if e < s or e - s + 1 > MAX_ANSWER_TOKENS:
                    continue
                value = float(start[s] + end[e])
                if value > best[q][0]:
                    best[q] = (value, context[offsets[s][0] : offsets[e][1]])
    return ["" if allow_null and null[q] > best[q][0] else best[q][1] for q in range(len(best))]


def qa_scores(spec: TaskSpec, outputs: Sequence[np.ndarray], data: Encoded) -> dict[str, float]:
    assert isinstance(data, QAEncoded)
    predicted = answers(outputs, data, allow_null=spec.unanswerable)
    gold = [q.answers for q in data.questions]
    scores: dict[str, float] = {}
    if {"f1", "exact_match"} & set(spec.metrics):
        squad = squad_scores(predicted, gold)
        scores.update(f1=squad["f1"], exact_match=squad["exact_match"])
    if {"klue_exact_match", "klue_rouge_w"} & set(spec.metrics):
        klue = klue_metrics.mrc_scores(predicted, gold)
        scores.update(klue_exact_match=klue["exact_match"], klue_rouge_w=klue["rouge_w"])
    return scores
