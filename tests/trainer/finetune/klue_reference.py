# ruff: noqa
"""KLUE's own metric functions, copied as they are (only the imports of KLUE's data classes,
which these functions do not use, left out) from

    https://github.com/KLUE-benchmark/KLUE-baseline
    commit 8a03c9447e4c225e806877a84242aea11258c790
    klue_baseline/metrics/functional.py and klue_baseline/metrics/utils.py

Copyright the KLUE-baseline authors, Apache License 2.0. test_klue_metrics.py runs them
beside trainer/finetune/klue_metrics.py on the same random predictions."""

import re
import string
from difflib import SequenceMatcher
from typing import Any, List, Tuple

import numpy as np
import sklearn
import sklearn.metrics
from scipy.stats import pearsonr
from seqeval.metrics import f1_score as ner_f1_score
from seqeval.scheme import IOB2

# --- klue_baseline/metrics/utils.py ---

NORMALIZE_CHAR_PATTERN = re.compile(r"[\'\"《》<>〈〉]\(\)\‘\’")
PUNCTUATION_SET = set(string.punctuation)


def normalize_answer_for_klue_mrc(answer: str) -> str:
    answer = NORMALIZE_CHAR_PATTERN.sub(" ", answer.lower())
    answer = "".join(c for c in answer if c not in PUNCTUATION_SET)
    answer = " ".join(answer.split())
    return answer


def rouge_w_score_for_klue_mrc(pred: str, label: str, beta: int = 1) -> float:
    """Calculates character level ROUGE-W score https://en.wikipedia.org/wiki/ROUGE_(metric)"""
    if label == "":
        return float(pred == label)

    matcher = SequenceMatcher(None, pred, label)
    longest_common_consecutive_sequence_length = matcher.find_longest_match(
        0, len(pred), 0, len(label)
    ).size

    precision = longest_common_consecutive_sequence_length / len(pred) if len(pred) else 0.0
    recall = longest_common_consecutive_sequence_length / len(label) if len(label) else 0.0

    if precision + recall == 0.0:
        return 0.0

    return (1 + beta**2) * (precision * recall) / (beta**2 * precision + recall)


def compute_em_and_rouge_w_score_for_klue_mrc(pred: str, labels: List[str]) -> Tuple[float, float]:
    em_scores, rouge_scores = [0.0], [0.0]

    for label in labels:
        em_scores.append(float(pred == label))
        rouge_scores.append(rouge_w_score_for_klue_mrc(pred, label))

    return max(em_scores), max(rouge_scores)


# --- klue_baseline/metrics/functional.py ---


def ynat_macro_f1(preds: np.ndarray, targets: np.ndarray) -> Any:
    return sklearn.metrics.f1_score(targets, preds, average="macro") * 100.0


def klue_nli_acc(preds: np.ndarray, targets: np.ndarray) -> Any:
    return (preds == targets).mean() * 100.0


def klue_sts_pearsonr(preds: np.ndarray, labels: np.ndarray) -> Any:
    return pearsonr(preds, labels)[0] * 100.0


def klue_sts_f1(preds: np.ndarray, labels: np.ndarray) -> Any:
    threshold = 3
    preds = np.where(preds >= threshold, 1, 0)
    labels = np.where(labels >= threshold, 1, 0)
    return sklearn.metrics.f1_score(labels, preds, average="binary") * 100.0


def klue_ner_entity_macro_f1(preds: np.ndarray, labels: np.ndarray, label_list: List[str]) -> Any:
    """KLUE-NER entity-level macro F1 (except O tag)"""
    preds = np.array(preds).flatten().tolist()
    labels = np.array(labels).flatten().tolist()
    preds_label = []
    labels_label = []

    for pred in preds:
        preds_label.append(label_list[pred])
    for label in labels:
        labels_label.append(label_list[label])

    entity_macro_f1 = ner_f1_score(
        [labels_label], [preds_label], average="macro", mode="strict", scheme=IOB2
    )
    return entity_macro_f1 * 100.0


def klue_ner_char_macro_f1(preds: np.ndarray, labels: np.ndarray, label_list: List[str]) -> Any:
    """KLUE-NER character level macro f1 (except O tag)"""
    label_indices = list(range(len(label_list)))
    preds = np.array(preds).flatten().tolist()
    trues = np.array(labels).flatten().tolist()
    return (
        sklearn.metrics.f1_score(
            trues, preds, labels=label_indices, average="macro", zero_division=True
        )
        * 100.0
    )


def klue_re_micro_f1(preds: np.ndarray, labels: np.ndarray, label_list: List[str]) -> Any:
    """KLUE-RE micro f1 (except no_relation)"""
    no_relation_label_idx = label_list.index("no_relation")
    label_indices = list(range(len(label_list)))
    label_indices.remove(no_relation_label_idx)
    return sklearn.metrics.f1_score(labels, preds, average="micro", labels=label_indices) * 100.0


def klue_re_auprc(probs: np.ndarray, labels: np.ndarray) -> Any:
    labels = np.eye(30)[labels]

    score = np.zeros((30,))
    for c in range(30):
        targets_c = labels.take([c], axis=1).ravel()
        preds_c = probs.take([c], axis=1).ravel()
        precision, recall, _ = sklearn.metrics.precision_recall_curve(targets_c, preds_c)
        score[c] = sklearn.metrics.auc(recall, precision)
    return np.average(score) * 100.0


def klue_mrc_scores(preds: List[str], answers: List[List[str]]) -> Tuple[float, float]:
    """klue_mrc_em and klue_mrc_rouge_w, less their grouping by question type (which their
    final mean over all questions undoes) and KLUE's example class."""
    em, rouge = [], []
    for pred, golds in zip(preds, answers):
        prediction = normalize_answer_for_klue_mrc(pred)
        ground_truths = [normalize_answer_for_klue_mrc(answer) for answer in golds]
        # For unanswerable questions, only correct answer is empty string
        if not ground_truths:
            ground_truths = [""]
        em_score, rouge_score = compute_em_and_rouge_w_score_for_klue_mrc(prediction, ground_truths)
        em.append(em_score)
        rouge.append(rouge_score)
    return np.mean(em) * 100.0, np.mean(rouge) * 100.0
