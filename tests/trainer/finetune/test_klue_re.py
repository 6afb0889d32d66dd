"""KLUE-RE as a built-in task: records read as released, subject and object marked as
KLUE-baseline marks them (its own code run beside ours, pieces included), the markers
added to the tokenizer and the embeddings, a tiny Korean BERT that learns the relation
from the marked object, KLUE's micro F1 and AUPRC, the export in transformers with the
markers in its vocabulary and equal logits, and bad spans as one line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from clozeworks.cli import main
from clozeworks.trainer.finetune import klue_metrics
from clozeworks.trainer.finetune.klue_re import encode_marked, with_markers
from clozeworks.trainer.finetune.markers import MARKERS, mark
from clozeworks.trainer.finetune.run import _encode_split, _tokenizer
from clozeworks.trainer.finetune.store import load
from clozeworks.trainer.finetune.tasks import BUILTIN
from clozeworks.trainer.finetune.train import predict
from tests.trainer.finetune import klue_alignment_reference as ref
from tests.trainer.finetune.test_klue_ner import ENTITIES, _sentence, korean_bert, korean_wordpiece

__all__ = ["korean_bert"]  # the fixture, shared with the NER tests
SPEC = BUILTIN["klue/re"]
# The relation follows from the object's type; two people: no relation.
RELATION = {"OG": "per:employee_of", "LC": "per:place_of_residence",
            "DT": "per:date_of_birth", "PS": "no_relation"}  # fmt: skip


def _entities(tags: list[str]) -> list[tuple[int, int, str]]:
    """(start, end inclusive, type) of each entity in a sentence's character tags."""
    out = []
    for i, tag in enumerate(tags):
        if tag.startswith("B-"):
            end = i
            while end + 1 < len(tags) and tags[end + 1] == "I-" + tag[2:]:
                end += 1
            out.append((i, end, tag[2:]))
    return out


def _record(rng: random.Random, guid: str, frames: bool = False) -> dict:
    """A sentence of two entities (or with `frames`, of the NER tests' frames) and the
    relation of its first person to another entity."""
    if frames:
        text, tags = _sentence(rng)
    else:
        kind = rng.choice(sorted(ENTITIES))
        person, other = ("PS", rng.choice(ENTITIES["PS"])), (kind, rng.choice(ENTITIES[kind]))
        parts = [person, ("", "는 "), other, ("", "에서 왔다.")]
        if rng.random() < 0.5:
            parts = [other, ("", ", "), person, ("", ".")]
        text, tags = "", []
        for label, words in parts:
            text += words
            inside = [f"B-{label}"] + [f"I-{label}"] * (len(words) - 1)
            tags += inside if label else ["O"] * len(words)
    found = _entities(tags)
    subject = next(e for e in found if e[2] == "PS")
    obj = rng.choice([e for e in found if e != subject])

    def entity(e: tuple[int, int, str]) -> dict:
        return {"word": text[e[0] : e[1] + 1], "start_idx": e[0], "end_idx": e[1], "type": e[2]}

    return {"guid": guid, "sentence": text, "subject_entity": entity(subject),
            "object_entity": entity(obj), "label": RELATION[obj[2]],
            "source": "wikitree"}  # fmt: skip


def write_klue_re(directory: Path, seed: int, rows: int) -> None:
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", rows), ("dev", rows // 4)):
        records = [_record(rng, f"klue-re-v1_{split}_{i:05d}") for i in range(n)]
        text = json.dumps(records, ensure_ascii=False, indent=4)
        (directory / SPEC.files[split]).write_text(text, encoding="utf-8")
    relations = {"relations": list(SPEC.labels)}
    (directory / "relation_list.json").write_text(json.dumps(relations, ensure_ascii=False))


@pytest.mark.parametrize("size", [0, 150])
def test_marks_and_pieces_are_klue_baselines(tmp_path, size) -> None:
    """The marked text is the baseline's `_mark_entity_spans`; the ids are BertTokenizer's
    pieces of it after the baseline's `fix_tokenization_error` (a Hangul piece right after
    an end marker turned to its ## form), but where the baseline's ## form is not in the
    vocabulary: there it becomes [UNK], here the piece stays as it was."""
    rng = random.Random(size)
    records = [_record(rng, str(i), frames=True) for i in range(200)]
    tok = with_markers(korean_wordpiece([r["sentence"] for r in records], size))
    vocab = tok.get_vocab()
    (tmp_path / "vocab.txt").write_text("\n".join(sorted(vocab, key=vocab.get)) + "\n")
    bert = transformers.BertTokenizer(str(tmp_path / "vocab.txt"), do_lower_case=False)
    bert.add_special_tokens({"additional_special_tokens": [m for p in MARKERS for m in p]})
    names = ("subject_entity", "object_entity")
    kept = fixed = 0
    for r in records:
        s, o = r["subject_entity"], r["object_entity"]
        theirs = ref.mark_entity_spans(
            r["sentence"], (s["start_idx"], s["end_idx"]), (o["start_idx"], o["end_idx"])
        )
        ours = mark(r["sentence"], [s, o], names)
        assert ours == theirs
        their_ids = bert.convert_tokens_to_ids(ref.fix_tokenization_error(bert, theirs))
        their_ids = [bert.cls_token_id, *their_ids, bert.sep_token_id]
        our_ids = encode_marked(tok, [ours], np.zeros(1), 128).ids[0]
        if our_ids == their_ids:
            kept += 1
            fixed += our_ids != tok.encode(ours).ids
        else:  # only where the baseline's ## form is unknown to the vocabulary
            differ = [i for i, (a, b) in enumerate(zip(our_ids, their_ids, strict=True)) if a != b]
            assert all(their_ids[i] == bert.unk_token_id for i in differ)
    assert kept >= 150 and fixed >= 50, (kept, fixed)


def test_markers_tell_the_model_which_entity_is_the_object(korean_bert, tmp_path) -> None:
    """Sentences holding a person, a place, an organization and a date; the relation is
    the marked object's type. With the markers a model learns it; the same sentences
    without them do not say which entity is asked about. (Four relations in a task file:
    a tiny model of random weights stays at the prior with KLUE's 30, 26 of them unseen.)"""
    rng = random.Random(3)
    data = tmp_path / "re4"
    data.mkdir()
    for split, n in (("train", 400), ("dev", 100)):
        records = [_record(rng, str(i), frames=True) for i in range(n)]
        (data / f"{split}.json").write_text(json.dumps(records, ensure_ascii=False))
    labels = json.dumps(sorted(set(RELATION.values())))
    task = (f'name = "re4"\nshape = "single"\nformat = "json"\ntext_a = "sentence"\n'
            f'label = "label"\nlabels = {labels}\nmetrics = ["accuracy", "klue_re_f1"]\n'
            f'[files]\ntrain = "train.json"\ndev = "dev.json"\n')  # fmt: skip
    marked = 'entities = ["subject_entity", "object_entity"]\n'
    (tmp_path / "marked.toml").write_text(marked + task)
    (tmp_path / "plain.toml").write_text(task)
    flags = ["--epochs", "20", "--lr", "1e-3", "--batch-size", "16", "--no-progress"]
    scores = {}
    for name in ("marked", "plain"):
        args = ["finetune", "--run", str(korean_bert), "--task", str(tmp_path / f"{name}.toml")]
        args += ["--data", str(data), "--output", str(tmp_path / name)]
        assert main([*args, *flags]) == 0
        scores[name] = json.loads((tmp_path / name / "finetune.json").read_text())["dev"]
    print(f"dev accuracy with and without markers: {scores}")  # shown with pytest -rP
    assert scores["marked"]["accuracy"] >= 90.0, scores
    assert scores["plain"]["accuracy"] <= 60.0, scores


def test_klue_re_end_to_end_with_klues_metrics_and_export(korean_bert, tmp_path) -> None:
    data, out, hf_dir = tmp_path / "re", tmp_path / "tuned", tmp_path / "hf"
    write_klue_re(data, seed=1, rows=80)
    args = ["finetune", "--run", str(korean_bert), "--task", "klue/re", "--data", str(data)]
    flags = ["--epochs", "2", "--lr", "1e-3", "--batch-size", "16", "--no-progress"]
    assert main([*args, "--output", str(out), *flags]) == 0
    info = json.loads((out / "finetune.json").read_text())
    assert info["examples"] == {"train": 80, "dev": 20}
    assert set(info["dev"]) == {"klue_re_f1", "klue_re_auprc"}
    tuned = load(out)
    tokenizer = _tokenizer(tuned.tokenizer)
    source = _tokenizer(korean_bert)
    assert tokenizer.get_vocab_size() == source.get_vocab_size() + 4
    assert tuned.config.model.vocab_size == tokenizer.get_vocab_size()  # rows for the markers
    assert main(["evaluate", "--model", str(out), "--data", str(data)]) == 0
    encoded, _ = _encode_split(SPEC, data, "dev", tokenizer, 128)
    logits = np.stack(predict(tuned.model, encoded, 16, 0))
    gold = encoded.labels.astype(int)
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    direct = {
        "klue_re_f1": klue_metrics.re_micro_f1(logits.argmax(1), gold, 30, 0),
        "klue_re_auprc": klue_metrics.re_auprc(shifted / shifted.sum(1, keepdims=True), gold),
    }
    evaluated = json.loads((out / "eval.json").read_text())["dev"]
    assert {k: evaluated[k] for k in direct} == pytest.approx(direct, abs=1e-9)
    assert main(["export", "--run", str(out), "--output", str(hf_dir)]) == 0
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(hf_dir).eval()
    assert hf.config.vocab_size == tokenizer.get_vocab_size()
    assert hf.config.id2label[0] == "no_relation" and len(hf.config.id2label) == 30
    tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    for opening, closing in MARKERS:
        assert tok.convert_tokens_to_ids(opening) == tokenizer.token_to_id(opening)
        assert tok.convert_tokens_to_ids(closing) == tokenizer.token_to_id(closing)
    rows = encoded.ids[:4]
    width = max(map(len, rows))
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=mask).logits
        ours = tuned.model(ids, mask, None)
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"word": "없음"}, r"record 3: subject_entity span 0-2 reads '.+', its word is '없음'$"),
        ({"end_idx": 999}, r"record 3: subject_entity span 0-999 is not inside the sentence$"),
        ({"start_idx": "0"}, r"record 3: subject_entity span '0'-2 is not inside"),
    ],
)
def test_a_bad_entity_is_one_line_naming_file_and_record(
    korean_bert, tmp_path, capsys, change, message
) -> None:
    import re

    data = tmp_path / "re"
    write_klue_re(data, seed=2, rows=8)
    train = data / SPEC.files["train"]
    records = json.loads(train.read_text(encoding="utf-8"))
    records[2]["subject_entity"] = {
        "word": records[2]["sentence"][:3], "start_idx": 0, "end_idx": 2, **change
    }  # fmt: skip
    train.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    args = ["finetune", "--run", str(korean_bert), "--task", "klue/re", "--data", str(data)]
    assert main([*args, "--output", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(train) in err
    assert re.search(message, err), err


def test_overlapping_entities_are_refused() -> None:
    from clozeworks.trainer.finetune.markers import SpanError

    a = {"word": "서울", "start_idx": 0, "end_idx": 1}
    b = {"word": "울", "start_idx": 1, "end_idx": 1}
    with pytest.raises(SpanError, match="the spans of s and o overlap"):
        mark("서울에서", [a, b], ("s", "o"))
    assert mark("서울에서", [a, {"word": "서", "start_idx": 3, "end_idx": 3}], ("s", "o")) == (
        "<subj>서울</subj>에<obj>서</obj>"
    )


def test_multitask_takes_relation_extraction_beside_character_ner(korean_bert, tmp_path) -> None:
    """MT-DNN with KLUE-RE and KLUE-NER: one encoder, its embeddings grown once for the
    markers, and both task models saved with the marked tokenizer."""
    from tests.trainer.finetune.test_klue_ner import write_klue_ner

    re_data, ner_data, out = tmp_path / "re", tmp_path / "ner", tmp_path / "mtdnn"
    write_klue_re(re_data, seed=4, rows=40)
    write_klue_ner(ner_data, seed=4, sentences=40)
    tasks = ["--task", "klue/re", "--data", str(re_data), "--task", "klue/ner"]
    args = ["finetune", "--run", str(korean_bert), *tasks, "--data", str(ner_data)]
    assert main([*args, "--output", str(out), "--epochs", "1", "--no-progress"]) == 0
    summary = json.loads((out / "multitask.json").read_text())
    assert set(summary["dev"]["klue/ner"]) == {"klue_entity_f1", "klue_char_f1"}
    a, b = load(out / "klue-re"), load(out / "klue-ner")
    assert a.config.model.vocab_size == b.config.model.vocab_size
    assert _tokenizer(b.tokenizer).token_to_id("<obj>") is not None
    encoder_a, encoder_b = a.model.encoder.state_dict(), b.model.encoder.state_dict()
    assert all(torch.equal(encoder_a[k], encoder_b[k]) for k in encoder_a)
    assert main(["evaluate", "--model", str(out / "klue-ner"), "--data", str(ner_data)]) == 0
