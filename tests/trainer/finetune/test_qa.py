"""SQuAD files, windows over long contexts, answer labels and the answer search."""

import json

import numpy as np
import pytest
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

from clozeworks.schemas.errors import BadInputError
from clozeworks.trainer.finetune.qa import answers, encode_questions, qa_scores, read_questions
from clozeworks.trainer.finetune.tasks import BUILTIN

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "who", "wrote", "it", "?", "the", "book", "was"]
WORDS += ["written", "by", "anna", "in", "paris", "long", "ago", ".", "where"]


def wordlevel() -> Tokenizer:
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    return tok


CONTEXT = "The book was written by Anna in Paris long ago."


def squad(questions, version="1.1"):
    return {
        "version": version,
        "data": [{"title": "t", "paragraphs": [{"context": CONTEXT, "qas": questions}]}],
    }


def write(path, payload) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload), encoding="utf-8")


def test_reader_checks_answers_and_names_the_question(tmp_path) -> None:
    qas = [
        {
            "id": "q1",
            "question": "Who wrote it?",
            "answers": [{"text": "Anna", "answer_start": 24}],
        },
        {"id": "q2", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 3}]},
    ]
    write(tmp_path / "train-v1.1.json", squad(qas))
    got = read_questions(BUILTIN["squad"], tmp_path, "train")
    assert [(q.id, q.answers, q.start) for q in got.items] == [
        ("q1", ("Anna",), 24),
        ("q2", ("Paris",), -2),
    ]
    assert got.unfound == 1
    write(tmp_path / "train-v1.1.json", squad([{"id": "q3", "answers": []}]))
    with pytest.raises(BadInputError, match="question q3: no str field 'question'"):
        read_questions(BUILTIN["squad"], tmp_path, "train")
    (tmp_path / "train-v1.1.json").write_text("{not json")
    with pytest.raises(BadInputError, match=r"train-v1\.1\.json: not SQuAD JSON"):
        read_questions(BUILTIN["squad"], tmp_path, "train")


def test_windows_overlap_and_label_the_answer_where_it_is_whole(tmp_path) -> None:
    qas = [
        {
            "id": "q1",
            "question": "Who wrote it?",
            "answers": [{"text": "Anna in Paris", "answer_start": 24}],
        }
    ]
    write(tmp_path / "dev-v1.1.json", squad(qas))
    questions = read_questions(BUILTIN["squad"], tmp_path, "dev").items
    # [CLS] who wrote it ? [SEP] + 6 context tokens + [SEP] = 12: windows of 6 context tokens.
    enc = encode_questions(wordlevel(), questions, max_len=12)
    assert len(enc.ids) > 1 and all(len(i) <= 12 for i in enc.ids)
    whole = []
    for w, (start, end) in enumerate(enc.labels.astype(int)):
        if start == 0:
            continue
        offsets = enc.offsets[w]
        whole.append(CONTEXT[offsets[start][0] : offsets[end][1]])
    assert whole and set(whole) == {"Anna in Paris"}
    # Logits pointing at the labelled span give the gold answer back.
    outputs = []
    for w, ids in enumerate(enc.ids):
        logits = np.zeros((len(ids), 2))
        start, end = enc.labels[w].astype(int)
        logits[start, 0] = logits[end, 1] = 5.0
        outputs.append(logits)
    assert answers(outputs, enc, allow_null=False) == ["Anna in Paris"]
    assert qa_scores(BUILTIN["squad"], outputs, enc) == {"f1": 100.0, "exact_match": 100.0}


def test_v2_answers_empty_when_the_null_score_wins(tmp_path) -> None:
    qas = [
        {"id": "a", "question": "Who wrote it?", "answers": [{"text": "Anna", "answer_start": 24}]},
        {"id": "b", "question": "Where?", "answers": [], "is_impossible": True},
    ]
    write(tmp_path / "dev-v2.0.json", squad(qas, "v2.0"))
    enc = encode_questions(
        wordlevel(), read_questions(BUILTIN["squad2"], tmp_path, "dev").items, 64
    )
    assert [tuple(x) for x in enc.labels.astype(int)] == [(11, 11), (0, 0)]
    outputs = []
    for w, ids in enumerate(enc.ids):
        logits = np.zeros((len(ids), 2))
        start, end = enc.labels[w].astype(int)
        logits[start, 0] = logits[end, 1] = 5.0
        outputs.append(logits)
    assert answers(outputs, enc, allow_null=True) == ["Anna", ""]
    assert answers(outputs, enc, allow_null=False)[0] == "Anna"
    assert qa_scores(BUILTIN["squad2"], outputs, enc)["exact_match"] == 100.0
