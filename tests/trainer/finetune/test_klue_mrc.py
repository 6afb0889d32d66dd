"""KLUE-MRC as a built-in task: its SQuAD 2.0 layout with `guid` ids and unanswerable
questions read as released, a tiny Korean BERT that learns to answer and to abstain, the
scores equal to KLUE's exact match and ROUGE-W on the answers it gives, and the export in
transformers' AutoModelForQuestionAnswering with equal logits."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
import transformers

from clozeworks.cli import main
from clozeworks.trainer.finetune import klue_metrics
from clozeworks.trainer.finetune.qa import answers
from clozeworks.trainer.finetune.run import _encode_split, _tokenizer
from clozeworks.trainer.finetune.store import load
from clozeworks.trainer.finetune.tasks import BUILTIN
from clozeworks.trainer.finetune.train import predict
from tests.trainer.finetune.test_klue_ner import _sentence, korean_bert

__all__ = ["korean_bert"]  # the fixture, shared with the NER tests
SPEC = BUILTIN["klue/mrc"]
# A question asks for one type of entity; a context without one cannot answer it.
QUESTIONS = {"PS": "누가 했다?", "LC": "어디에서?", "OG": "어느 회사?"}


def _paragraph(rng: random.Random, split: str, i: int) -> dict:
    text, tags = _sentence(rng)
    kind = rng.choice(sorted(QUESTIONS))
    starts = [k for k, t in enumerate(tags) if t == f"B-{kind}"]
    qa: dict = {"question": QUESTIONS[kind], "guid": f"klue-mrc-v1_{split}_{i:05d}",
                "question_type": 1, "is_impossible": not starts, "answers": [],
                "plausible_answers": []}  # fmt: skip
    if starts:
        end = starts[0]
        while end + 1 < len(tags) and tags[end + 1] == f"I-{kind}":
            end += 1
        qa["answers"] = [{"text": text[starts[0] : end + 1], "answer_start": starts[0]}]
    else:
        qa["question_type"] = 3
    return {"context": text, "qas": [qa]}


def write_klue_mrc(directory: Path, seed: int, contexts: int) -> None:
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", contexts), ("dev", contexts // 4)):
        data = [{"title": f"기사 {i}", "paragraphs": [_paragraph(rng, split, i)],
                 "news_category": "사회", "source": "hankyung"} for i in range(n)]  # fmt: skip
        payload = {"version": "KLUE-MRC-v1.1", "data": data}
        text = json.dumps(payload, ensure_ascii=False)
        (directory / SPEC.files[split]).write_text(text, encoding="utf-8")


def test_klue_mrc_answers_abstains_and_exports(korean_bert, tmp_path) -> None:
    data, out, hf_dir = tmp_path / "mrc", tmp_path / "tuned", tmp_path / "hf"
    write_klue_mrc(data, seed=0, contexts=400)
    dev = json.loads((data / SPEC.files["dev"]).read_text(encoding="utf-8"))["data"]
    impossible = sum(p["paragraphs"][0]["qas"][0]["is_impossible"] for p in dev)
    assert 0 < impossible < len(dev)  # both kinds of question in dev
    args = ["finetune", "--run", str(korean_bert), "--task", "klue/mrc", "--data", str(data)]
    flags = ["--epochs", "12", "--lr", "1e-3", "--batch-size", "16", "--no-progress"]
    assert main([*args, "--output", str(out), *flags]) == 0
    info = json.loads((out / "finetune.json").read_text())
    print(f"klue/mrc dev: {info['dev']}")  # shown with pytest -rP
    assert info["dev"]["klue_exact_match"] >= 80.0, info["epochs"]
    assert info["dev"]["klue_rouge_w"] >= 80.0, info["epochs"]
    assert main(["evaluate", "--model", str(out), "--data", str(data)]) == 0
    tuned = load(out)
    tokenizer = _tokenizer(tuned.tokenizer)
    encoded, _ = _encode_split(SPEC, data, "dev", tokenizer, 128)
    outputs = predict(tuned.model, encoded, 16, 0)
    given = answers(outputs, encoded, allow_null=True)
    assert "" in given and any(given)  # abstains on some, answers others
    gold = [q.answers for q in encoded.questions]
    direct = klue_metrics.mrc_scores(given, gold)
    evaluated = json.loads((out / "eval.json").read_text())["dev"]
    assert evaluated["klue_exact_match"] == pytest.approx(direct["exact_match"], abs=1e-9)
    assert evaluated["klue_rouge_w"] == pytest.approx(direct["rouge_w"], abs=1e-9)
    assert main(["export", "--run", str(out), "--output", str(hf_dir)]) == 0
    hf = transformers.AutoModelForQuestionAnswering.from_pretrained(hf_dir).eval()
    tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    question = encoded.questions[0]
    batch = tok([question.question], [question.context], return_tensors="pt")
    assert batch["input_ids"][0].tolist() == encoded.ids[0]
    with torch.no_grad():
        theirs = hf(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        ours = tuned.model(batch["input_ids"], batch["attention_mask"], None)
    torch.testing.assert_close(theirs.start_logits, ours[..., 0], atol=1e-4, rtol=0)
    torch.testing.assert_close(theirs.end_logits, ours[..., 1], atol=1e-4, rtol=0)


def test_a_question_without_its_guid_is_one_line(korean_bert, tmp_path, capsys) -> None:
    data = tmp_path / "mrc"
    write_klue_mrc(data, seed=1, contexts=8)
    train = data / SPEC.files["train"]
    payload = json.loads(train.read_text(encoding="utf-8"))
    del payload["data"][2]["paragraphs"][0]["qas"][0]["guid"]
    train.write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
    args = ["finetune", "--run", str(korean_bert), "--task", "klue/mrc", "--data", str(data)]
    assert main([*args, "--output", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"{train}: data[2].paragraphs[0].qas[0]: no str field id or guid"), err
