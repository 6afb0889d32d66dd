"""The fine-tuning metrics are the leaderboards' own (issue 34, item 9): on the same
predictions, every figure equals what the libraries GLUE, CoNLL and SQuAD score with give,
scikit-learn, scipy, seqeval and the official SQuAD evaluation logic (copied below from
`evaluate-v2.0.py`), to 1e-9, over many random cases, ties and degenerate ones."""

from __future__ import annotations

import random
import re
import string
from collections import Counter

import numpy as np
import pytest

from clozeworks.trainer.finetune import metrics

sklearn_metrics = pytest.importorskip("sklearn.metrics")
stats = pytest.importorskip("scipy.stats")
CASES = 300


def _labels(rng: random.Random, n: int, classes: int) -> list[int]:
    return [rng.randrange(classes) for _ in range(n)]


def test_glue_classification_metrics_are_scikit_learns() -> None:
    rng = random.Random(0)
    for case in range(CASES):
        n, classes = rng.randint(1, 60), rng.choice([2, 2, 3, 5])
        y, p = _labels(rng, n, classes), _labels(rng, n, classes)
        if case % 10 == 0:
            p = [p[0]] * n  # a constant prediction: Matthews is 0 by definition
        assert metrics.accuracy(p, y) == pytest.approx(sklearn_metrics.accuracy_score(y, p))
        assert metrics.matthews(p, y) == pytest.approx(
            sklearn_metrics.matthews_corrcoef(y, p), abs=1e-12
        )
        if classes == 2:
            expected = sklearn_metrics.f1_score(y, p, pos_label=1, zero_division=0.0)
            assert metrics.f1_binary(p, y) == pytest.approx(expected, abs=1e-12)


def test_glue_regression_metrics_are_scipys() -> None:
    rng = np.random.default_rng(1)
    for case in range(CASES):
        n = int(rng.integers(3, 80))
        x = rng.normal(size=n)
        y = 0.5 * x + rng.normal(size=n)
        if case % 3 == 0:  # STS-B's scores come in steps of 0.2: many ties
            x, y = np.round(x * 5) / 5, np.round(y * 5) / 5
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            continue
        assert metrics.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
        assert metrics.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)


def test_entity_f1_is_seqevals_conlleval() -> None:
    seqeval = pytest.importorskip("seqeval.metrics")
    rng = random.Random(2)
    tags = ["O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG", "B-ORG"]
    for _ in range(CASES):
        golds = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(5)]
        preds = [[t if rng.random() < 0.7 else rng.choice(tags) for t in g] for g in golds]
        ours = metrics.entity_f1(preds, golds)
        # seqeval's default mode is conlleval's chunking, which reads IOB1 and IOB2 alike.
        assert ours["precision"] == pytest.approx(
            100 * seqeval.precision_score(golds, preds, zero_division=0), abs=1e-9
        )
        assert ours["recall"] == pytest.approx(
            100 * seqeval.recall_score(golds, preds, zero_division=0), abs=1e-9
        )
        assert ours["f1"] == pytest.approx(
            100 * seqeval.f1_score(golds, preds, zero_division=0), abs=1e-9
        )


# --- the official SQuAD v2.0 evaluation logic (evaluate-v2.0.py), verbatim; v1.1's is the
# same but for an empty answer, which only v2.0 has (it scores 1 only against empty) ------


def _official_normalize_answer(s: str) -> str:
    def remove_articles(text: str) -> str:
        regex = re.compile(r"\b(a|an|the)\b", re.UNICODE)
        return re.sub(regex, " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text: str) -> str:
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def _official_get_tokens(s: str) -> list[str]:
    if not s:
        return []
    return _official_normalize_answer(s).split()


def _official_compute_exact(a_gold: str, a_pred: str) -> int:
    return int(_official_normalize_answer(a_gold) == _official_normalize_answer(a_pred))


def _official_compute_f1(a_gold: str, a_pred: str) -> float:
    gold_toks = _official_get_tokens(a_gold)
    pred_toks = _official_get_tokens(a_pred)
    common = Counter(gold_toks) & Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        # If either is no-answer, then F1 is 1 if they agree, 0 otherwise
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def test_squad_scores_are_the_official_scripts() -> None:
    rng = random.Random(3)
    words = ["The", "a", "Paris", "paris,", "France", "an", "capital", "of", "the", "city."]
    predictions, golds = [], []
    for _ in range(CASES):
        golds.append(
            [" ".join(rng.choices(words, k=rng.randint(1, 5))) for _ in range(rng.randint(1, 3))]
        )
        predictions.append(" ".join(rng.choices(words, k=rng.randint(1, 6))))
    predictions += ["", "the", "Paris"]  # v2.0: no answer, an answer of only an article
    golds += [[""], ["a"], [""]]
    em = f1 = 0.0
    for prediction, answers in zip(predictions, golds, strict=True):
        # evaluate-v2.0.py's get_raw_scores: the best over the gold answers
        em += max(_official_compute_exact(a, prediction) for a in answers)
        f1 += max(_official_compute_f1(a, prediction) for a in answers)
    ours = metrics.squad_scores(predictions, golds)
    assert ours["exact_match"] == pytest.approx(100.0 * em / len(golds), abs=1e-9)
    assert ours["f1"] == pytest.approx(100.0 * f1 / len(golds), abs=1e-9)
