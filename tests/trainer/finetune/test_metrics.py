import math

import numpy as np
import pytest

from clozeworks.trainer.finetune.metrics import (
    accuracy,
    chunks,
    entity_f1,
    f1_binary,
    matthews,
    normalize_answer,
    pearson,
    ranks,
    spearman,
    squad_f1,
    squad_scores,
)


def test_binary_scores_match_their_textbook_formulas_on_random_labels() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        y = rng.integers(0, 2, 40)
        p = rng.integers(0, 2, 40)
        tp = int(((p == 1) & (y == 1)).sum())
        tn = int(((p == 0) & (y == 0)).sum())
        fp = int(((p == 1) & (y == 0)).sum())
        fn = int(((p == 0) & (y == 1)).sum())
        denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        expected = (tp * tn - fp * fn) / denominator if denominator else 0.0
        assert matthews(p, y) == pytest.approx(expected, abs=1e-12)
        assert f1_binary(p, y) == pytest.approx(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
        assert accuracy(p, y) == pytest.approx((tp + tn) / 40)


def test_matthews_known_values() -> None:
    assert matthews([1, 1, 0, 0, 1], [1, 0, 0, 0, 1]) == pytest.approx(2 / 3)
    assert matthews([1, 1, 1], [0, 1, 0]) == 0.0  # a constant prediction
    # Three classes: every sample right gives 1, a permutation of the classes gives < 0.
    assert matthews([0, 1, 2, 2], [0, 1, 2, 2]) == pytest.approx(1.0)
    assert matthews([1, 2, 0], [0, 1, 2]) == pytest.approx(-0.5)


def test_correlations_with_ties_match_scipy_definitions() -> None:
    assert list(ranks([10, 20, 20, 30, 20])) == [1, 3, 3, 5, 3]
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(0.9486832980505138)
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=200), rng.normal(size=200)
    assert pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
    assert spearman(x, x**3) == pytest.approx(1.0)  # monotone, not linear
    assert pearson([1, 1, 1], [1, 2, 3]) == 0.0


def test_squad_normalization_and_scores() -> None:
    assert normalize_answer("The  Cat, an animal!") == "cat animal"
    assert squad_f1("the cat sat", "cat sat down") == pytest.approx(0.8)
    scores = squad_scores(["Paris", "in 1990", ""], [["paris", "Paris, France"], ["1990"], []])
    assert scores["exact_match"] == pytest.approx(200 / 3)  # the third: unanswerable, empty
    assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1) / 3)
    assert squad_scores(["x"], [[]]) == {"exact_match": 0.0, "f1": 0.0}


def test_entity_f1_reads_iob1_and_iob2_like_conlleval() -> None:
    gold = ["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]  # IOB1: B- only between same types
    assert chunks(gold) == {(0, 2, "PER"), (3, 4, "LOC"), (4, 5, "LOC")}
    predicted = ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]
    assert chunks(predicted) == {(0, 2, "PER"), (3, 5, "LOC")}
    scores = entity_f1([predicted], [gold])
    assert scores["precision"] == pytest.approx(50.0)
    assert scores["recall"] == pytest.approx(100 / 3)
    assert scores["f1"] == pytest.approx(40.0)
    assert chunks(["B-ORG", "I-PER", "O"]) == {(0, 1, "ORG"), (1, 2, "PER")}
