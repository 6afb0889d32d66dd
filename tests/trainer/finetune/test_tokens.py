"""CoNLL column files, first-piece labels, and entity-level scoring of token tasks."""

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, processors

from clozeworks.schemas.errors import BadInputError
from clozeworks.trainer.finetune.tasks import BUILTIN
from clozeworks.trainer.finetune.tokens import (
    encode_sentences,
    read_sentences,
    token_scores,
    word_predictions,
)

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP I-ORG
rejects VBZ B-VP O
German JJ B-NP I-MISC
call NN I-NP O
. . O O

Peter NNP B-NP I-PER
Blackburn NNP I-NP I-PER
"""


def wordpiece() -> Tokenizer:
    vocab = {
        t: i
        for i, t in enumerate(
            [
                "[PAD]",
                "[UNK]",
                "[CLS]",
                "[SEP]",
                "eu",
                "re",
                "##jects",
                "german",
                "call",
                ".",
                "peter",
                "black",
                "##burn",
            ]
        )
    }
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.normalizer = __import__("tokenizers").normalizers.Lowercase()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return tok


def test_conll2003_reads_sentences_and_skips_docstart(tmp_path) -> None:
    (tmp_path / "train.txt").write_text(CONLL, encoding="utf-8")
    spec = BUILTIN["conll2003"]
    got = read_sentences(spec, tmp_path, "train").items
    assert [s.words for s in got] == [
        ["EU", "rejects", "German", "call", "."],
        ["Peter", "Blackburn"],
    ]
    names = [[spec.labels[t] for t in s.tags] for s in got]
    assert names == [["I-ORG", "O", "I-MISC", "O", "O"], ["I-PER", "I-PER"]]
    assert [s.line for s in got] == [3, 9]


def test_bad_tag_and_short_line_name_the_line(tmp_path) -> None:
    spec = BUILTIN["conll2003"]
    (tmp_path / "train.txt").write_text("EU NNP B-NP I-ORG\nrejects VBZ B-VP B-FOO\n")
    with pytest.raises(BadInputError, match=r"train.txt:2: tag 'B-FOO' is not one of O, B-PER"):
        read_sentences(spec, tmp_path, "train")
    two = spec.__class__(
        **{**spec.to_json(), "label": 3, "labels": spec.labels, "metrics": spec.metrics}
    )
    (tmp_path / "train.txt").write_text("EU I-ORG\n")
    with pytest.raises(BadInputError, match=r"train.txt:1: 2 columns; the word is column 0"):
        read_sentences(two, tmp_path, "train")


def test_labels_go_on_first_pieces_and_cut_words_score_as_o(tmp_path) -> None:
    (tmp_path / "train.txt").write_text(CONLL, encoding="utf-8")
    spec = BUILTIN["conll2003"]
    sentences = read_sentences(spec, tmp_path, "train").items
    enc = encode_sentences(wordpiece(), sentences, max_len=6)
    # [CLS] eu re ##jects german [SEP]: "call" and "." are cut off.
    assert enc.ids[0] == [2, 4, 5, 6, 7, 3]
    org, misc = spec.labels.index("I-ORG"), spec.labels.index("I-MISC")
    assert enc.piece_labels[0] == [-100, org, 0, -100, misc, -100]
    assert enc.first_pieces[0] == [1, 2, 4, -1, -1] and enc.truncated == 1
    # Perfect logits on the pieces there are: the cut words are predicted O, and "call"
    # and "." are O in the gold too, so every entity is found.
    outputs = []
    for labels in enc.piece_labels:
        logits = np.zeros((len(labels), len(spec.labels)))
        for i, c in enumerate(labels):
            logits[i, max(c, 0)] = 1.0
        outputs.append(logits)
    assert word_predictions(outputs, enc.first_pieces)[0] == [org, 0, misc, 0, 0]
    scores = token_scores(spec, outputs, enc)
    assert scores["entity_f1"] == pytest.approx(100.0) and scores["token_accuracy"] == 100.0
    outputs[1][1] = np.eye(len(spec.labels))[0]  # "Peter" -> O: the PER entity shrinks
    scores = token_scores(spec, outputs, enc)
    assert scores["precision"] == pytest.approx(200 / 3) and scores["recall"] == pytest.approx(
        200 / 3
    )
