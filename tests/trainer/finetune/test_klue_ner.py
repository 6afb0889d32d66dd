"""KLUE-NER as a built-in task: KLUE's character-tagged files read as released, the tags
carried to the pieces and back to the characters (WordPiece, an [UNK] over a whole word,
byte-level BPE), a tiny Korean BERT that learns the entities, scores equal to KLUE's metric
functions on the written characters, the export in transformers with equal logits, and
bad lines as one line naming file and line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

from clozeworks.cli import main
from clozeworks.trainer.finetune import klue_metrics
from clozeworks.trainer.finetune.klue_ner import (
    CharSentence,
    character_tags,
    encode_char_sentences,
    read_char_sentences,
)
from clozeworks.trainer.finetune.run import _encode_split, _tokenizer
from clozeworks.trainer.finetune.store import load
from clozeworks.trainer.finetune.tasks import BUILTIN
from clozeworks.trainer.finetune.train import predict, score

SPEC = BUILTIN["klue/ner"]
OUTSIDE = SPEC.labels.index("O")
# KLUE-NER's files start with these comment lines (the released v1.1 files' own).
HEADER = (
    "## 토큰, 레이블 구분자 : \\t\n## 토큰 구분자 : \\n\n## 문장 구분자 : \\n\\n\n"
    "## 주석 : ##\n## 컬럼명 : CHAR\tNE_TAG\n"
)
ENTITIES = {
    "PS": ["김철수", "이영희", "박지성", "최민수"],
    "LC": ["서울", "부산", "대전", "광주"],
    "OG": ["한국은행", "삼성전자", "현대차"],
    "DT": ["어제", "오늘", "3월"],
}
FRAMES = [
    "{PS}는 {DT} {LC}에서 {OG}를 방문했다.",
    "{DT} {OG}는 {LC}에 공장을 세웠다고 {PS}가 말했다.",
    "{PS}와 {PS}는 {LC}로 떠났다.",
]


def _sentence(rng: random.Random) -> tuple[str, list[str]]:
    """A sentence from a frame and its character tags."""
    frame = rng.choice(FRAMES)
    text, tags = "", []
    for i, part in enumerate(frame.replace("}", "{").split("{")):
        if i % 2:  # an entity type
            name = rng.choice(ENTITIES[part])
            text += name
            tags += [f"B-{part}"] + [f"I-{part}"] * (len(name) - 1)
        else:
            text += part
            tags += ["O"] * len(part)
    return text, tags


def write_klue_ner(directory: Path, seed: int, sentences: int) -> None:
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", sentences), ("dev", sentences // 4)):
        blocks = []
        for i in range(n):
            text, tags = _sentence(rng)
            lines = [f"## klue-ner-v1_{split}_{i:05d}_wikitree\t{text}"]
            lines += [f"{c}\t{t}" for c, t in zip(text, tags, strict=True)]
            blocks.append("\n".join(lines))
        body = HEADER + "\n\n".join(blocks) + "\n"
        (directory / SPEC.files[split]).write_text(body, encoding="utf-8")


def korean_wordpiece(texts: list[str], size: int = 200) -> Tokenizer:
    """BERT's pieces (no lower-casing or accent stripping, which would take Hangul apart);
    `size` 0: every character of `texts`, alone and continuing a word, in code point
    order (the trainer's own order of its alphabet changes from process to process)."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = sorted({c for t in texts for c in t if not c.isspace()})
    vocab = [*specials, *chars, *(f"##{c}" for c in chars)]
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    if size:
        trainer = trainers.WordPieceTrainer(vocab_size=size, special_tokens=specials)
        tok.train_from_iterator(texts, trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )  # fmt: skip
    return tok


@pytest.fixture(scope="module")
def korean_bert(tmp_path_factory) -> Path:
    """A tiny BERT of random weights with a Korean WordPiece vocabulary, saved by
    transformers: a source `cloze finetune` takes."""
    directory = tmp_path_factory.mktemp("korean-bert")
    rng = random.Random(9)
    # Characters as pieces: a piece never spans an entity's end, so a model can be exact.
    tok = korean_wordpiece([_sentence(rng)[0] for _ in range(400)], size=0)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
        pad_token="[PAD]", mask_token="[MASK]",
    )  # fmt: skip
    fast.save_pretrained(directory)
    config = transformers.BertConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.BertForMaskedLM(config).save_pretrained(directory)
    return directory


def test_the_released_layout_is_read_with_spaces_and_comments(tmp_path) -> None:
    write_klue_ner(tmp_path, seed=0, sentences=8)
    dev = read_char_sentences(SPEC, tmp_path, "dev").items
    assert len(dev) == 2
    lines = (tmp_path / SPEC.files["dev"]).read_text(encoding="utf-8").split("\n")
    first = dev[0]
    assert lines[first.line - 2].startswith("## klue-ner-v1_dev_00000")
    assert lines[first.line - 2].split("\t")[1] == first.text
    assert " " in first.text and len(first.tags) == len(first.text)
    assert all(
        SPEC.labels[t] == "O" for c, t in zip(first.text, first.tags, strict=True) if c == " "
    )
    # The baseline splits sentences at \n\t?\n: a separator line holding a tab is one too.
    (tmp_path / "tab.tsv").write_text("가\tO\n\t\n나\tB-PS\n", encoding="utf-8")
    spec = BUILTIN["klue/ner"]
    tabbed = read_char_sentences(
        type(spec)(**{**spec.__dict__, "files": {"dev": "tab.tsv"}}), tmp_path, "dev"
    ).items
    assert [s.text for s in tabbed] == ["가", "나"]


def _oracle(encoded) -> list[np.ndarray]:
    """Logits that predict exactly the pieces' training labels."""
    return [np.eye(len(SPEC.labels))[labels] for labels in encoded.piece_labels]


def test_tags_go_to_pieces_and_come_back_to_the_characters(tmp_path) -> None:
    write_klue_ner(tmp_path, seed=1, sentences=40)
    train = read_char_sentences(SPEC, tmp_path, "train").items
    tok = korean_wordpiece([s.text for s in train])
    encoded = encode_char_sentences(tok, train, 128, OUTSIDE)
    for sentence, ids, labels in zip(train, encoded.ids, encoded.piece_labels, strict=True):
        e = tok.encode(sentence.text)
        assert ids == e.ids
        for piece, (token, (begin, _)) in enumerate(zip(e.tokens, e.offsets, strict=True)):
            if token in ("[CLS]", "[SEP]"):
                assert labels[piece] == OUTSIDE
            else:  # the tag of the piece's first character
                assert labels[piece] == sentence.tags[begin]
    # The pieces' own labels, predicted, give back every character's tag but where one
    # piece spans an entity's end and what follows (김철수는 as one piece: 는 reads I-PS).
    predicted, gold = character_tags(SPEC, _oracle(encoded), encoded)
    chars = sum(len(s.text.replace(" ", "")) for s in train)
    assert len(gold) == len(predicted) == chars + 2 * len(train)
    spans = []  # per character in scoring order: the gold tags of its whole piece
    for sentence in train:
        e = tok.encode(sentence.text)
        seen: set[int] = set()
        spans.append(None)
        for begin, end in e.offsets[1:-1]:
            for c in range(begin, end):
                if not sentence.text[c].isspace() and c not in seen:
                    seen.add(c)
                    spans.append({SPEC.labels[sentence.tags[k]][2:] for k in range(begin, end)
                                  if not sentence.text[k].isspace()})  # fmt: skip
        spans.append(None)
    wrong = [i for i, (p, g) in enumerate(zip(predicted, gold, strict=True)) if p != g]
    assert all(len(spans[i]) > 1 for i in wrong)  # only in pieces across a boundary


def test_an_unknown_word_and_byte_level_pieces_still_cover_every_character() -> None:
    text = "김철수는 鬱陵島에서 왔다"
    tags = [0, 1, 1, OUTSIDE, OUTSIDE, 2, 3, 3] + [OUTSIDE] * 5
    item = CharSentence(text, tags, 1)
    wordpiece = korean_wordpiece(["김철수는 서울에서 왔다"] * 5)
    encoded = encode_char_sentences(wordpiece, [item], 128, OUTSIDE)
    assert "[UNK]" in wordpiece.encode(text).tokens  # 鬱陵島에서: one [UNK] for the word
    assert (encoded.owners[0] >= 0).all()
    predicted, gold = character_tags(SPEC, _oracle(encoded), encoded)
    # The [UNK] takes 鬱's tag (B-LC); the rest of its word continues it, as the baseline.
    assert predicted[5:10] == ["B-LC", "I-LC", "I-LC", "I-LC", "I-LC"]
    assert gold[5:10] == ["B-LC", "I-LC", "I-LC", "O", "O"]
    byte_level = Tokenizer(models.BPE())
    byte_level.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    byte_level.train_from_iterator(["김철수는 서울에서"] * 5, trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))  # fmt: skip
    encoded = encode_char_sentences(byte_level, [item], 128, OUTSIDE)
    assert (encoded.owners[0] >= 0).all()
    predicted, gold = character_tags(SPEC, _oracle(encoded), encoded)
    assert predicted[1:4] == gold[1:4] == ["B-PS", "I-PS", "I-PS"]


@pytest.mark.parametrize("size", [0, 150, 400])
@pytest.mark.parametrize("max_len", [128, 12])
def test_pieces_and_characters_are_klue_baselines(tmp_path, size, max_len) -> None:
    """KLUE-baseline's own alignment code (copied in klue_alignment_reference.py) with
    transformers' BertTokenizer of the same vocabulary, beside ours with `tokenizers`:
    the same label on every piece, and from the same random piece predictions the same
    character predictions and gold tags, cut off at the same character. Characters as
    pieces (size 0), and words of several characters as pieces (150, 400).

    Sentences with an [UNK] are left out: there the baseline's loop never steps past the
    [UNK]'s piece, so every later character takes the prediction of the piece before its
    own (ours gives each character its own piece's: the test above)."""
    from tests.trainer.finetune import klue_alignment_reference as ref

    rng = random.Random(size + max_len)
    sentences = [_sentence(rng) for _ in range(200)]
    tok = korean_wordpiece([t for t, _ in sentences], size)
    vocab = tok.get_vocab()
    (tmp_path / "vocab.txt").write_text("\n".join(sorted(vocab, key=vocab.get)) + "\n")
    bert = transformers.BertTokenizer(str(tmp_path / "vocab.txt"), do_lower_case=False)
    names = list(SPEC.labels)
    compared = 0
    for text, tags in sentences:
        doc = "## klue-ner-v1_dev_00000\t" + text + "\n"
        doc += "\n".join(f"{c}\t{t}" for c, t in zip(text, tags, strict=True))
        _, their_labels, clean = ref.create_example_labels(bert, doc)
        item = CharSentence(text, [names.index(t) for t in tags], 1)
        ours = encode_char_sentences(tok, [item], max_len, OUTSIDE)
        assert "[UNK]" not in tok.encode(text).tokens
        row = ours.ids[0]
        assert [names[i] for i in ours.piece_labels[0][1:-1]] == their_labels[: max_len - 2]
        picks = [rng.randrange(len(names)) for _ in row]
        padded = picks + [picks[-1]] * (max_len - len(row))  # [-1]: the last special token
        example = {"original_sentence": text, "original_clean_labels": clean}
        their_chars, their_gold = ref.character_preds(bert, padded, example, names, max_len)
        predicted, gold = character_tags(SPEC, [np.eye(len(names))[picks]], ours)
        assert predicted == [names[i] for i in their_chars]
        assert gold == [names[i] for i in their_gold]
        compared += 1
    assert compared == 200


def test_characters_past_the_length_are_left_out_of_the_score(tmp_path) -> None:
    write_klue_ner(tmp_path, seed=2, sentences=8)
    train = read_char_sentences(SPEC, tmp_path, "train").items
    tok = korean_wordpiece([s.text for s in train])
    short = encode_char_sentences(tok, train, 5, OUTSIDE)
    assert short.truncated == len(train)
    predicted, gold = character_tags(SPEC, _oracle(short), short)
    reached = sum(int((o >= 0).sum()) for o in short.owners)
    assert len(gold) == len(predicted) == reached + 2 * len(train)


def test_klue_ner_learns_scores_with_klues_metrics_and_exports(korean_bert, tmp_path) -> None:
    data, out, hf_dir = tmp_path / "ner", tmp_path / "tuned", tmp_path / "hf"
    write_klue_ner(data, seed=3, sentences=240)
    args = ["finetune", "--run", str(korean_bert), "--task", "klue/ner", "--data", str(data)]
    flags = ["--epochs", "6", "--lr", "2e-3", "--batch-size", "16", "--no-progress"]
    assert main([*args, "--output", str(out), *flags]) == 0
    info = json.loads((out / "finetune.json").read_text())
    assert info["examples"] == {"train": 240, "dev": 60}
    assert info["dev"]["klue_entity_f1"] >= 90.0, info["epochs"]
    assert info["dev"]["klue_char_f1"] >= 90.0, info["epochs"]
    assert main(["evaluate", "--model", str(out), "--data", str(data)]) == 0
    tuned = load(out)
    tokenizer = _tokenizer(tuned.tokenizer)
    encoded, _ = _encode_split(SPEC, data, "dev", tokenizer, 128)
    outputs = predict(tuned.model, encoded, 16, 0)
    predicted, gold = character_tags(SPEC, outputs, encoded)
    index = {t: i for i, t in enumerate(SPEC.labels)}
    direct = {
        "klue_entity_f1": klue_metrics.ner_entity_macro_f1(predicted, gold),
        "klue_char_f1": klue_metrics.ner_char_macro_f1(
            [index[t] for t in predicted], [index[t] for t in gold], len(SPEC.labels)
        ),
    }
    evaluated = json.loads((out / "eval.json").read_text())["dev"]
    assert {k: evaluated[k] for k in direct} == pytest.approx(direct, abs=1e-9)
    assert main(["export", "--run", str(out), "--output", str(hf_dir)]) == 0
    hf = transformers.AutoModelForTokenClassification.from_pretrained(hf_dir).eval()
    assert [hf.config.id2label[i] for i in range(len(SPEC.labels))] == list(SPEC.labels)
    tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    texts = [s.text for s in read_char_sentences(SPEC, data, "dev").items]
    assert tok(texts)["input_ids"] == encoded.ids
    batch = tok(texts[:4], padding=True, return_tensors="pt")
    with torch.no_grad():
        theirs = hf(**batch).logits
        ours = tuned.model(batch["input_ids"], batch["attention_mask"], None)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(theirs[real], ours[real], atol=1e-4, rtol=0)
    assert score(SPEC, outputs, encoded) == pytest.approx(direct)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("가나\tO", r":3: not one character, a tab and its tag: '가나\\tO'$"),
        ("가\tB-XX", r":3: tag 'B-XX' is not one of B-PS, .*, O$"),
        ("가 O", r":3: not one character, a tab and its tag"),
    ],
)
def test_a_bad_line_is_one_line_naming_file_and_line(
    korean_bert, tmp_path, capsys, line, message
) -> None:
    import re

    data = tmp_path / "ner"
    data.mkdir()
    for split in ("train", "dev"):
        body = f"## klue-ner-v1_{split}_00000\t가{line[0]}\n가\tO\n{line}\n"
        (data / SPEC.files[split]).write_text(body, encoding="utf-8")
    args = ["finetune", "--run", str(korean_bert), "--task", "klue/ner", "--data", str(data)]
    assert main([*args, "--output", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and SPEC.files["train"] in err
    assert re.search(message, err), err
