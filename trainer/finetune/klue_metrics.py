"""KLUE's metrics (Park et al. 2021), as its baseline computes them
(`KLUE-benchmark/KLUE-baseline`, klue_baseline/metrics/functional.py and utils.py), in
percent:

- YNAT: macro F1 over the topics seen in the gold or the predictions;
- STS: Pearson's r, and F1 of "similar" (a score of 3 or more on 0-5) after binarizing both;
- NLI: accuracy;
- NER: entity-level macro F1 (seqeval's strict IOB2: an entity is a B- and the I- of its
  type after it, over all sentences' tags as one sequence, as the baseline passes them)
  and character-level macro F1 over every tag, `O` too, a tag neither seen nor predicted
  counting 1 (the baseline's `zero_division=True`);
- RE: micro F1 over the relations but `no_relation`, and the mean over all relations of
  the area under each one's precision-recall curve (scikit-learn's, trapezoids);
- MRC: exact match and character-level ROUGE-W (the longest common substring's F1, as
  difflib finds it) after KLUE's answer normalization, the best over a question's gold
  answers; an unanswerable question's only gold is the empty string.

Written here so that fine-tuning needs no scikit-learn, scipy or seqeval;
tests/trainer/finetune/test_klue_metrics.py holds each equal to KLUE's own functions,
copied beside it, on hundreds of random cases. Where KLUE's code differs from its paper's
words (character F1 counts `O`, which its docstring says it leaves out), the code is
followed: its numbers are the ones reported.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from difflib import SequenceMatcher

import numpy as np

from clozeworks.trainer.finetune.metrics import accuracy, f1_binary, pearson

# The threshold of KLUE-STS's binary "similar" label (0-5 scale).
STS_THRESHOLD = 3.0


def macro_f1(
    predictions: Sequence[int],
    labels: Sequence[int],
    classes: Sequence[int] | None = None,
    zero_division: float = 0.0,
) -> float:
    """scikit-learn's macro F1 over `classes` (by default every class in either), in
    percent; a class neither predicted nor gold scores `zero_division`."""
    p, y = np.asarray(predictions), np.asarray(labels)
    kinds = np.union1d(p, y) if classes is None else np.asarray(classes)
    scores = []
    for k in kinds.tolist():
        tp = float(((p == k) & (y == k)).sum())
        denominator = float((p == k).sum() + (y == k).sum())
        scores.append(2 * tp / denominator if denominator else zero_division)
    return 100.0 * float(np.mean(scores)) if scores else 0.0


def ynat_macro_f1(predictions: Sequence[int], labels: Sequence[int]) -> float:
    return macro_f1(predictions, labels)


def nli_accuracy(predictions: Sequence[int], labels: Sequence[int]) -> float:
    return 100.0 * accuracy(predictions, labels)


def sts_pearson(predictions: Sequence[float], labels: Sequence[float]) -> float:
    return 100.0 * pearson(predictions, labels)


def sts_f1(predictions: Sequence[float], labels: Sequence[float]) -> float:
    p = (np.asarray(predictions) >= STS_THRESHOLD).astype(int)
    y = (np.asarray(labels) >= STS_THRESHOLD).astype(int)
    return 100.0 * f1_binary(p.tolist(), y.tolist())


def strict_entities(tags: Sequence[str]) -> set[tuple[int, int, str]]:
    """(start, end exclusive, type) of seqeval's strict IOB2 entities: a B-X and the I-X
    that follow it; an I- with no B- before it starts nothing."""
    found = set()
    i = 0
    while i < len(tags):
        prefix, _, kind = tags[i].partition("-")
        if prefix != "B":
            i += 1
            continue
        end = i + 1
        while end < len(tags) and tags[end] == f"I-{kind}":
            end += 1
        found.add((i, end, kind))
        i = end
    return found


def ner_entity_macro_f1(predictions: Sequence[str], golds: Sequence[str]) -> float:
    """seqeval's strict macro F1 over entity types, from tags given as one sequence."""
    p, g = strict_entities(predictions), strict_entities(golds)
    scores = []
    for kind in sorted({k for *_, k in p | g}):
        pk, gk = {e for e in p if e[2] == kind}, {e for e in g if e[2] == kind}
        tp = len(pk & gk)
        precision = tp / len(pk) if pk else 0.0
        recall = tp / len(gk) if gk else 0.0
        total = precision + recall
        scores.append(2 * precision * recall / total if total else 0.0)
    return 100.0 * float(np.mean(scores)) if scores else 0.0


def ner_char_macro_f1(predictions: Sequence[int], labels: Sequence[int], n_labels: int) -> float:
    """Macro F1 over every tag id (the baseline counts `O` too), per character."""
    return macro_f1(predictions, labels, range(n_labels), zero_division=1.0)


def re_micro_f1(
    predictions: Sequence[int], labels: Sequence[int], n_labels: int, no_relation: int
) -> float:
    """Micro F1 over the relations but `no_relation`: its true and false positives are
    not counted, a pair wrongly called no_relation is a miss."""
    p, y = np.asarray(predictions), np.asarray(labels)
    kept = [k for k in range(n_labels) if k != no_relation]
    tp = float(sum(((p == k) & (y == k)).sum() for k in kept))
    denominator = float(np.isin(p, kept).sum() + np.isin(y, kept).sum())
    return 100.0 * 2 * tp / denominator if denominator else 0.0


def precision_recall_auc(targets: np.ndarray, scores: np.ndarray) -> float:
    """The area under scikit-learn's precision-recall curve (`precision_recall_curve`,
    then `auc`): a point per distinct score, (recall 0, precision 1) added, trapezoids.
    With no positive, recall is 1 at every threshold, as scikit-learn sets it."""
    order = np.argsort(scores, kind="mergesort")[::-1]
    s, y = scores[order], targets[order].astype(bool)
    last = np.r_[np.flatnonzero(np.diff(s)), y.size - 1]
    tps = np.cumsum(y * 1.0, dtype=np.float64)[last]
    fps = 1 + last - tps
    predicted = tps + fps
    precision = np.zeros_like(tps)
    np.divide(tps, predicted, out=precision, where=predicted != 0)
    recall = np.ones_like(tps) if tps[-1] == 0 else tps / tps[-1]
    p, r = np.hstack((precision[::-1], 1)), np.hstack((recall[::-1], 0))
    direction = -1.0 if np.any(np.diff(r) < 0) else 1.0
    return float(direction * np.trapezoid(p, r))


def re_auprc(probabilities: np.ndarray, labels: Sequence[int]) -> float:
    """The mean over relations of each one's precision-recall AUC, one against the rest."""
    probs = np.asarray(probabilities, dtype=np.float64)
    onehot = np.eye(probs.shape[1])[np.asarray(labels)]
    areas = [precision_recall_auc(onehot[:, c], probs[:, c]) for c in range(probs.shape[1])]
    return 100.0 * float(np.average(areas))


# KLUE's pattern as written: a class of quotes and brackets, then the literal `()‘’`.
_NORMALIZE = re.compile(r"[\'\"《》<>〈〉]\(\)\‘\’")
_PUNCTUATION = set(string.punctuation)


def normalize_mrc_answer(answer: str) -> str:
    answer = _NORMALIZE.sub(" ", answer.lower())
    answer = "".join(c for c in answer if c not in _PUNCTUATION)
    return " ".join(answer.split())


def rouge_w(prediction: str, gold: str) -> float:
    """KLUE's character ROUGE-W: F1 of the longest common substring (difflib's)."""
    if gold == "":
        return float(prediction == gold)
    found = SequenceMatcher(None, prediction, gold).find_longest_match(
        0, len(prediction), 0, len(gold)
    )
    precision = found.size / len(prediction) if prediction else 0.0
    recall = found.size / len(gold)
    total = precision + recall
    return 2 * precision * recall / total if total else 0.0


def mrc_scores(predictions: Sequence[str], golds: Sequence[Sequence[str]]) -> dict[str, float]:
    """`exact_match` and `rouge_w` in percent, each the best over a question's answers."""
    em, rouge = [], []
    for prediction, answers in zip(predictions, golds, strict=True):
        predicted = normalize_mrc_answer(prediction)
        wanted = [normalize_mrc_answer(a) for a in answers] or [""]
        em.append(max([0.0, *(float(predicted == a) for a in wanted)]))
        rouge.append(max([0.0, *(rouge_w(predicted, a) for a in wanted)]))
    return {
        "exact_match": 100.0 * float(np.mean(em)) if em else 0.0,
        "rouge_w": 100.0 * float(np.mean(rouge)) if rouge else 0.0,
    }
