"""The benchmarks' own metrics: GLUE's (accuracy, F1, Matthews, Pearson, Spearman), SQuAD's
exact match and F1 with its answer normalization, and CoNLL's entity-level F1.

Definitions follow the reference scorers: GLUE's `compute_metrics` (scikit-learn's
`f1_score` on the positive class 1, `matthews_corrcoef`, scipy's `pearsonr`/`spearmanr`),
SQuAD v1.1's `evaluate-v1.1.py` / v2.0's `evaluate-v2.0.py` (best score over the gold
answers; an unanswerable question's only gold answer is the empty string), and `conlleval`
(a chunk counts when its type and both ends match; IOB1 and IOB2 alike). They are written
here so that fine-tuning needs none of those libraries;
tests/trainer/finetune/test_metrics_reference.py checks every figure against scikit-learn,
scipy, seqeval and evaluate-v2.0.py's own functions on the same predictions.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

import numpy as np


def accuracy(predictions: Sequence[int], labels: Sequence[int]) -> float:
    p, y = np.asarray(predictions), np.asarray(labels)
    return float((p == y).mean()) if len(y) else 0.0


def f1_binary(predictions: Sequence[int], labels: Sequence[int], positive: int = 1) -> float:
    """F1 of the positive class (MRPC's and QQP's `f1`); 0 when it is never predicted or seen."""
    p, y = np.asarray(predictions) == positive, np.asarray(labels) == positive
    tp = float((p & y).sum())
    denominator = float(p.sum() + y.sum())
    return 2 * tp / denominator if denominator else 0.0


def matthews(predictions: Sequence[int], labels: Sequence[int]) -> float:
    """Matthews correlation over any number of classes (Gorodkin's R_K, as scikit-learn);
    0 when either side is constant."""
    p, y = np.asarray(predictions), np.asarray(labels)
    classes = np.union1d(p, y)
    c = np.zeros((len(classes), len(classes)))
    np.add.at(c, (np.searchsorted(classes, y), np.searchsorted(classes, p)), 1)
    t, q = c.sum(axis=1), c.sum(axis=0)  # true and predicted counts per class
    n, correct = c.sum(), np.trace(c)
    cov_yp = correct * n - t @ q
    cov_pp = n * n - q @ q
    cov_yy = n * n - t @ t
    if cov_pp == 0 or cov_yy == 0:
        return 0.0
    return float(cov_yp / np.sqrt(cov_pp * cov_yy))


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    a, b = a - a.mean(), b - b.mean()
    denominator = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / denominator) if denominator else 0.0


def ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks, ties sharing their mean rank (scipy's `rankdata`, method 'average')."""
    v = np.asarray(values, dtype=np.float64)
    order = np.argsort(v, kind="stable")
    sorted_v = v[order]
    # Start of each run of equal values, and the mean of the 1-based positions it covers.
    starts = np.flatnonzero(np.r_[True, sorted_v[1:] != sorted_v[:-1]])
    ends = np.r_[starts[1:], len(v)]
    mean_rank = (starts + ends + 1) / 2.0
    out = np.empty(len(v))
    out[order] = np.repeat(mean_rank, ends - starts)
    return out


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    return pearson(ranks(x), ranks(y))


# --- SQuAD ----------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's normalization: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def squad_exact(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def squad_f1(prediction: str, gold: str) -> float:
    predicted, wanted = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not predicted or not wanted:  # v2.0: an empty answer scores 1 only against empty
        return float(predicted == wanted)
    common = sum((Counter(predicted) & Counter(wanted)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions: Sequence[str], golds: Sequence[Sequence[str]]) -> dict[str, float]:
    """`exact_match` and `f1` in percent, each the best over a question's gold answers (an
    unanswerable question has none: its gold is the empty string)."""
    if not golds:
        return {"exact_match": 0.0, "f1": 0.0}
    em = f1 = 0.0
    for prediction, answers in zip(predictions, golds, strict=True):
        answers = list(answers) or [""]
        em += max(squad_exact(prediction, a) for a in answers)
        f1 += max(squad_f1(prediction, a) for a in answers)
    return {"exact_match": 100.0 * em / len(golds), "f1": 100.0 * f1 / len(golds)}


# --- CoNLL ----------------------------------------------------------------------------------


def chunks(tags: Sequence[str]) -> set[tuple[int, int, str]]:
    """(start, end exclusive, type) of every entity in IOB1 or IOB2 tags, as conlleval: a
    chunk starts at B-, or at I- after O or after a tag of another type."""
    found: set[tuple[int, int, str]] = set()
    start, kind = -1, ""
    for i, tag in enumerate([*tags, "O"]):
        prefix, _, label = tag.partition("-")
        begins = prefix == "B" or (prefix == "I" and (kind != label or start < 0))
        if start >= 0 and (prefix == "O" or begins or label != kind):
            found.add((start, i, kind))
            start, kind = -1, ""
        if begins:
            start, kind = i, label
    return found


def entity_f1(
    predictions: Sequence[Sequence[str]], golds: Sequence[Sequence[str]]
) -> dict[str, float]:
    """conlleval's overall precision, recall and F1 (in percent) over sentences."""
    tp = n_pred = n_gold = 0
    for predicted, wanted in zip(predictions, golds, strict=True):
        p, g = chunks(predicted), chunks(wanted)
        tp += len(p & g)
        n_pred += len(p)
        n_gold += len(g)
    precision = 100.0 * tp / n_pred if n_pred else 0.0
    recall = 100.0 * tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}
