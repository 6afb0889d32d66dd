"""KLUE's YNAT, NLI and STS as built-in tasks, read from files written as KLUE releases
them (one JSON array each, Korean text, STS's score nested in `labels`): fine-tuned end to
end from a tiny run and from its transformers export, scored with KLUE's metrics (the
figures equal klue_metrics on the predictions written), exported to transformers with
equal logits; a bad record is one line naming the file and the record. NER, RE and MRC
from a run too."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
import transformers

from clozeworks.cli import main
from clozeworks.trainer.finetune import klue_metrics
from clozeworks.trainer.finetune.store import load
from clozeworks.trainer.finetune.tasks import BUILTIN

WORDS = ["정부", "경기", "선수", "주가", "기술", "문화", "국회", "우승", "시장", "연구"]


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) + "."


def write_klue(directory, task: str, seed: int = 0, rows: int = 24) -> None:
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    spec = BUILTIN[task]
    # fmt: off
    for split, name in spec.files.items():
        records = []
        for i in range(rows if split == "train" else rows // 2):
            guid = f"klue-{task.split('/')[1]}-v1_{split}_{i:05d}"
            if task == "klue/ynat":
                record = {
                    "guid": guid,
                    "title": _sentence(rng),
                    "label": rng.choice(spec.labels),
                    "url": "https://example.com",
                    "date": "2016.06.30. 오전 10:36",
                }
            elif task == "klue/nli":
                record = {
                    "guid": guid,
                    "source": "NSMC",
                    "premise": _sentence(rng),
                    "hypothesis": _sentence(rng),
                    "gold_label": rng.choice(spec.labels),
                    "author": "x",
                    "label2": "x",
                    "label3": "x",
                    "label4": "x",
                    "label5": "x",
                }
            else:
                score = round(rng.random() * 5, 1)
                record = {
                    "guid": guid,
                    "source": "airbnb-rtt",
                    "sentence1": _sentence(rng),
                    "sentence2": _sentence(rng),
                    "labels": {
                        "label": score,
                        "real-label": score,
                        "binary-label": int(score >= 3),
                    },
                }
            records.append(record)
        (directory / name).write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    # fmt: on


@pytest.fixture(scope="module")
def tiny_export(tiny_run, tmp_path_factory):
    """The tiny run exported: a transformers directory to fine-tune from."""
    out = tmp_path_factory.mktemp("export") / "hf"
    assert main(["export", "--run", str(tiny_run), "--output", str(out)]) == 0
    return out


@pytest.mark.parametrize("source", ["run", "transformers"])
@pytest.mark.parametrize("task", ["klue/ynat", "klue/nli", "klue/sts"])
def test_klue_task_end_to_end(task, source, tiny_run, tiny_export, tmp_path) -> None:
    data, out = tmp_path / "data", tmp_path / "tuned"
    write_klue(data, task)
    start = tiny_run if source == "run" else tiny_export
    args = ["finetune", "--run", str(start), "--task", task, "--data", str(data)]
    assert main([*args, "--output", str(out), "--epochs", "1", "--no-progress"]) == 0
    info = json.loads((out / "finetune.json").read_text())
    spec = BUILTIN[task]
    assert main(["evaluate", "--model", str(out), "--data", str(data), "--device", "cpu"]) == 0
    assert set(info["dev"]) >= set(spec.metrics), info["dev"]
    rows = [json.loads(line) for line in (out / "predictions-dev.jsonl").read_text().splitlines()]
    if spec.shape == "regression":
        predicted = [r["prediction"] for r in rows]
        gold = [r["label"] for r in rows]
        assert info["dev"]["klue_sts_f1"] == pytest.approx(klue_metrics.sts_f1(predicted, gold))
        assert info["dev"]["pearson"] == pytest.approx(klue_metrics.sts_pearson(predicted, gold))
    else:
        index = {label: i for i, label in enumerate(spec.labels)}
        predicted = [index[r["prediction"]] for r in rows]
        gold = [index[r["label"]] for r in rows]
        name = spec.metrics[0]
        want = (
            klue_metrics.ynat_macro_f1(predicted, gold)
            if name == "klue_macro_f1"
            else klue_metrics.nli_accuracy(predicted, gold)
        )
        assert info["dev"][name] == pytest.approx(want)
    # The export reads in transformers with the same logits, Korean labels and all.
    assert main(["export", "--run", str(out), "--output", str(tmp_path / "hf")]) == 0
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "hf")
    if spec.labels:
        assert list(hf.config.id2label.values()) == list(spec.labels)
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    batch = tok(["정부 국회 시장.", "선수 우승 경기."], ["연구 기술.", "문화."], padding=True,
                return_tensors="pt")  # fmt: skip
    tuned = load(out)
    with torch.no_grad():
        ours = tuned.model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        theirs = hf.eval()(**batch).logits
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=0)
    assert np.isfinite(theirs.numpy()).all()


def test_a_bad_klue_record_is_one_line(tiny_run, tmp_path, capsys) -> None:
    data = tmp_path / "data"
    write_klue(data, "klue/sts")
    train = data / BUILTIN["klue/sts"].files["train"]
    records = json.loads(train.read_text())
    del records[4]["labels"]["real-label"]
    train.write_text(json.dumps(records, ensure_ascii=False))
    args = ["finetune", "--run", str(tiny_run), "--task", "klue/sts", "--data", str(data)]
    assert main([*args, "--output", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{train}: record 5: no field 'labels.real-label'" in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()
    train.write_text('{"not": "an array"}')
    assert main([*args, "--output", str(tmp_path / "o"), "--no-progress"]) == 2
    assert "not a JSON array of examples" in capsys.readouterr().err


@pytest.mark.parametrize("task", ["klue/ner", "klue/re", "klue/mrc"])
def test_klue_tasks_of_their_own_modules_from_a_run(task, tiny_run, tmp_path) -> None:
    """NER, RE and MRC from a training run (their learning is shown from a transformers
    directory with a Korean vocabulary in their own test modules): dev scored, evaluate
    agreeing, the export loading in transformers with our logits. RE adds its markers to
    the run's tokenizer and rows to its embeddings."""
    from tests.trainer.finetune.test_klue_mrc import write_klue_mrc
    from tests.trainer.finetune.test_klue_ner import write_klue_ner
    from tests.trainer.finetune.test_klue_re import write_klue_re

    data, out, hf_dir = tmp_path / "data", tmp_path / "tuned", tmp_path / "hf"
    {"klue/ner": write_klue_ner, "klue/re": write_klue_re, "klue/mrc": write_klue_mrc}[task](
        data, 0, 24
    )
    args = ["finetune", "--run", str(tiny_run), "--task", task, "--data", str(data)]
    assert main([*args, "--output", str(out), "--epochs", "1", "--no-progress"]) == 0
    info = json.loads((out / "finetune.json").read_text())
    spec = BUILTIN[task]
    assert set(info["dev"]) >= set(spec.metrics)
    assert main(["evaluate", "--model", str(out), "--data", str(data), "--device", "cpu"]) == 0
    evaluated = json.loads((out / "eval.json").read_text())["dev"]
    assert {m: evaluated[m] for m in spec.metrics} == pytest.approx(
        {m: info["dev"][m] for m in spec.metrics}, abs=1e-9
    )
    assert main(["export", "--run", str(out), "--output", str(hf_dir)]) == 0
    auto = {"tokens": transformers.AutoModelForTokenClassification,
            "qa": transformers.AutoModelForQuestionAnswering,
            "single": transformers.AutoModelForSequenceClassification}[spec.shape]  # fmt: skip
    hf, loading = auto.from_pretrained(hf_dir, output_loading_info=True)
    assert not loading["missing_keys"] and not loading["unexpected_keys"]
    from clozeworks.trainer.finetune.run import _encode_split, _tokenizer

    tuned = load(out)
    encoded, _ = _encode_split(spec, data, "dev", _tokenizer(tuned.tokenizer), 128)
    row = torch.tensor([encoded.ids[0]])
    with torch.no_grad():
        ours = tuned.model(row, torch.ones_like(row), torch.zeros_like(row))
        theirs = hf.eval()(input_ids=row, attention_mask=torch.ones_like(row))
    got = (
        theirs.logits
        if spec.shape != "qa"
        else torch.stack([theirs.start_logits, theirs.end_logits], dim=-1)
    )
    torch.testing.assert_close(got, ours, atol=1e-4, rtol=0)
