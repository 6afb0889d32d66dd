"""Each KLUE metric equals KLUE-baseline's own function (klue_reference.py, copied from the
commit it names) on 300 random cases, within 1e-9: random sizes, label counts and
predictions skewed so that classes go unseen, entities break and answers half match."""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest

from clozeworks.trainer.finetune import klue_metrics as ours

pytest.importorskip("sklearn")
pytest.importorskip("seqeval")
pytest.importorskip("scipy")
from tests.trainer.finetune import klue_reference as klue

CASES = 300
TOLERANCE = 1e-9


def _near(a: float, b: float) -> bool:
    return abs(float(a) - float(b)) <= TOLERANCE


def _labels(rng: np.random.Generator, n: int, k: int, agree: float) -> tuple:
    gold = rng.integers(0, k, n)
    pred = np.where(rng.random(n) < agree, gold, rng.integers(0, k, n))
    return pred, gold


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's ill-defined-metric warnings
        yield


def test_ynat_nli_and_sts() -> None:
    rng = np.random.default_rng(0)
    for _ in range(CASES):
        n, k = int(rng.integers(2, 60)), int(rng.integers(2, 8))
        pred, gold = _labels(rng, n, k, rng.random())
        assert _near(ours.ynat_macro_f1(pred, gold), klue.ynat_macro_f1(pred, gold))
        assert _near(ours.nli_accuracy(pred, gold), klue.klue_nli_acc(pred, gold))
        scores = np.round(rng.random(n) * 5, 1)
        noisy = np.clip(scores + rng.normal(0, rng.random() * 2, n), 0, 5)
        if np.ptp(noisy) > 0 and np.ptp(scores) > 0:
            assert _near(ours.sts_pearson(noisy, scores), klue.klue_sts_pearsonr(noisy, scores))
        assert _near(ours.sts_f1(noisy, scores), klue.klue_sts_f1(noisy, scores))


def test_ner_entity_and_character_f1() -> None:
    rng = np.random.default_rng(1)
    types = ["DT", "LC", "OG", "PS", "QT", "TI"]
    label_list = [f"{p}-{t}" for t in types for p in "BI"] + ["O"]
    for _ in range(CASES):
        n = int(rng.integers(1, 80))
        # Mostly O, with runs of B- then I-, and stray I- tags the strict scheme ignores.
        gold = rng.choice(len(label_list), n, p=_tag_weights(label_list, rng))
        pred = np.where(rng.random(n) < rng.random(), gold, rng.integers(0, len(label_list), n))
        tags_p, tags_g = [label_list[i] for i in pred], [label_list[i] for i in gold]
        want = klue.klue_ner_entity_macro_f1(pred, gold, label_list)
        if not np.isnan(want):
            assert _near(ours.ner_entity_macro_f1(tags_p, tags_g), want), (tags_p, tags_g)
        want = klue.klue_ner_char_macro_f1(pred, gold, label_list)
        assert _near(ours.ner_char_macro_f1(pred, gold, len(label_list)), want)


def _tag_weights(label_list: list[str], rng: np.random.Generator) -> np.ndarray:
    w = np.where([t == "O" for t in label_list], 6.0, 1.0) * rng.random(len(label_list))
    return w / w.sum()


def test_re_micro_f1_and_auprc() -> None:
    rng = np.random.default_rng(2)
    label_list = ["no_relation", *(f"rel:{i}" for i in range(29))]  # KLUE-RE's 30
    for _ in range(CASES):
        n = int(rng.integers(2, 120))
        gold = np.where(rng.random(n) < 0.4, 0, rng.integers(0, 30, n))
        logits = rng.normal(0, 1, (n, 30))
        logits[np.arange(n), gold] += rng.random() * 4
        probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        if rng.random() < 0.2:
            probs = np.round(probs, 1)  # ties between scores
        pred = probs.argmax(axis=1)
        want = klue.klue_re_micro_f1(pred, gold, label_list)
        assert _near(ours.re_micro_f1(pred, gold, 30, 0), want)
        assert _near(ours.re_auprc(probs, gold), klue.klue_re_auprc(probs, gold))


def test_mrc_exact_match_and_rouge_w() -> None:
    rng = random.Random(3)
    words = [
        "서울",
        "특별시",
        "1394년",
        "조선",
        "《한양》",
        "‘수도’",
        "(도시)",
        "Seoul",
        "the",
        ".",
    ]
    for _ in range(CASES):
        n = rng.randrange(1, 20)
        golds = [
            [" ".join(rng.choices(words, k=rng.randrange(1, 5))) for _ in range(rng.randrange(3))]
            for _ in range(n)
        ]
        predictions = []
        for answers in golds:
            if answers and rng.random() < 0.4:
                predictions.append(rng.choice(answers))
            elif answers and rng.random() < 0.5:
                text = rng.choice(answers)
                cut = rng.randrange(0, len(text))
                predictions.append(text[cut:] + rng.choice(["", "에서", "!"]))
            else:
                predictions.append(rng.choice(["", " ".join(rng.choices(words, k=2))]))
        got = ours.mrc_scores(predictions, golds)
        em, rouge = klue.klue_mrc_scores(predictions, golds)
        assert _near(got["exact_match"], em) and _near(got["rouge_w"], rouge)
