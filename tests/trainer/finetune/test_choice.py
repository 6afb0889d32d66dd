"""Multiple choice end to end: RACE's released files and SWAG's CSV read as they are, a
model that learns to pick the option, `cloze evaluate` agreeing with its own predictions,
and the export loading in transformers' AutoModelForMultipleChoice with AutoTokenizer's ids
and our scores."""

from __future__ import annotations

import csv
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from clozeworks.cli import main
from clozeworks.trainer.finetune.choice import joined, read_choices
from clozeworks.trainer.finetune.run import _encode_split, _pad_id, _tokenizer
from clozeworks.trainer.finetune.store import load
from clozeworks.trainer.finetune.tasks import BUILTIN, TaskSpec
from clozeworks.trainer.finetune.train import batches, predict, score
from tests.trainer.finetune.test_finetune_cli import NEGATIVE, POSITIVE, write_sst2

LETTERS = "ABCD"


def _question(rng: random.Random) -> tuple[str, list[str], int]:
    """A question whose right option is made of POSITIVE's words and the three wrong ones of
    NEGATIVE's: learnable from the options alone, at any position."""
    answer = rng.randrange(4)
    options = [
        " ".join(rng.choice(POSITIVE if i == answer else NEGATIVE) for _ in range(3))
        for i in range(4)
    ]
    stem = rng.choice(["which one is right ?", "the answer is _ here .", "pick _"])
    return stem, options, answer


def write_race(root: Path, seed: int, articles: int) -> None:
    """RACE's layout: SPLIT/{middle,high}/N.txt, a JSON object per article."""
    rng = random.Random(seed)
    for split, n in (("train", articles), ("dev", articles // 3)):
        for i in range(n):
            level = ("middle", "high")[i % 2]
            questions = [_question(rng) for _ in range(rng.randint(1, 4))]
            article = {
                "answers": [LETTERS[a] for _, _, a in questions],
                "options": [o for _, o, _ in questions],
                "questions": [q for q, _, _ in questions],
                "article": " ".join(rng.choice(POSITIVE + NEGATIVE) for _ in range(30)),
                "id": f"{level}{i}.txt",
            }
            path = root / split / level / f"{i}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(article), encoding="utf-8")


SWAG_HEADER = [
    "",
    "video-id",
    "fold-ind",
    "startphrase",
    "sent1",
    "sent2",
    "gold-source",
    "ending0",
    "ending1",
    "ending2",
    "ending3",
    "label",
]


def write_swag(root: Path, seed: int, rows: int) -> None:
    """SWAG's train.csv and val.csv: its columns, an unnamed index first."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", rows), ("val", rows // 3)):
        with (root / f"{split}.csv").open("w", encoding="utf-8", newline="") as f:
            out = csv.writer(f)
            out.writerow(SWAG_HEADER)
            for i in range(n):
                _, options, answer = _question(rng)
                sent1 = " ".join(rng.choice(POSITIVE + NEGATIVE) for _ in range(8))
                out.writerow([i, f"lsmdc{i}", i, sent1, sent1, "someone", "gold", *options, answer])


def test_race_is_read_as_released_and_options_join_their_question(tmp_path) -> None:
    write_race(tmp_path, seed=0, articles=12)
    spec = BUILTIN["race"]
    questions = read_choices(spec, tmp_path, "dev").items
    files = sorted((tmp_path / "dev").rglob("*.txt"))
    expected = sum(len(json.loads(p.read_text())["questions"]) for p in files)
    assert len(questions) == expected and expected >= 4
    first = json.loads(files[0].read_text())
    assert questions[0].text_a == first["article"]
    assert list(questions[0].options) == first["options"][0]
    assert questions[0].label == LETTERS.index(first["answers"][0])
    high = read_choices(BUILTIN["race/high"], tmp_path, "dev").items
    middle = read_choices(BUILTIN["race/middle"], tmp_path, "dev").items
    assert len(high) + len(middle) == expected
    # transformers' rule: fill the blank, else question + " " + option.
    assert joined("the answer is _ here .", "yes", "_") == "the answer is yes here ."
    assert joined("which one ?", "yes", "_") == "which one ? yes"
    assert joined(None, "yes", None) == "yes"


def _finetune(args: list[str]) -> None:
    flags = ["--lr", "1e-3", "--batch-size", "8", "--no-progress", "--max-seq-len", "64"]
    assert main(["finetune", *args, *flags]) == 0


def test_race_finetune_learns_evaluates_and_exports(tiny_run, tmp_path, capsys) -> None:
    data, tuned, hf_dir = tmp_path / "RACE", tmp_path / "tuned", tmp_path / "hf"
    write_race(data, seed=1, articles=120)
    common = ["--run", str(tiny_run), "--task", "race", "--data", str(data)]
    _finetune([*common, "--output", str(tuned), "--epochs", "4"])
    info = json.loads((tuned / "finetune.json").read_text())
    dev = read_choices(BUILTIN["race"], data, "dev").items
    assert info["examples"]["dev"] == len(dev)
    # Chance is 25%; the right option's words tell it apart.
    assert info["dev"]["accuracy"] >= 90.0, info["epochs"]
    assert main(["evaluate", "--model", str(tuned), "--data", str(data)]) == 0
    scores = json.loads((tuned / "eval.json").read_text())["dev"]
    rows = [json.loads(line) for line in (tuned / scores["predictions"]).open()]
    assert [r["label"] for r in rows] == [LETTERS[int(q.label)] for q in dev]
    right = np.mean([r["label"] == r["prediction"] for r in rows])
    assert scores["accuracy"] == pytest.approx(100 * right)
    assert set(rows[0]["probabilities"]) == set(LETTERS)

    assert main(["export", "--run", str(tuned), "--output", str(hf_dir)]) == 0
    model, loading = transformers.AutoModelForMultipleChoice.from_pretrained(
        hf_dir, output_loading_info=True
    )
    assert not loading["missing_keys"] and not loading["unexpected_keys"]
    assert type(model).__name__ == "BertForMultipleChoice"
    assert [model.config.id2label[i] for i in range(4)] == list(LETTERS)
    finetuned = load(tuned)
    tokenizer = _tokenizer(finetuned.tokenizer)
    encoded, _ = _encode_split(BUILTIN["race"], data, "dev", tokenizer, 64)
    # AutoTokenizer makes the same rows as transformers' RACE example does.
    tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    firsts = [q.text_a for q in dev for _ in q.options]
    seconds = [joined(q.text_b, o, "_") for q in dev for o in q.options]
    theirs_ids = tok(firsts, seconds, truncation="longest_first", max_length=64)["input_ids"]
    assert theirs_ids == [row.tolist() for row in encoded.ids]
    pad_id = _pad_id(tokenizer, finetuned.config.model.pad_token_id)
    ours = predict(finetuned.model, encoded, 16, pad_id)
    theirs = []
    with torch.no_grad():
        for batch, _ in batches(encoded, 16, range(encoded.size), pad_id, torch.device("cpu")):
            theirs += list(model.eval()(**batch).logits.numpy())
    assert max(float(np.abs(a - b).max()) for a, b in zip(ours, theirs, strict=True)) <= 1e-4
    assert score(BUILTIN["race"], theirs, encoded) == {"accuracy": scores["accuracy"]}
    capsys.readouterr()
    assert main(["inspect", str(hf_dir), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["class"] == "BertForMultipleChoice" and shown["task"] == "race"
    assert shown["labels"] == list(LETTERS)

    # A transformers directory fine-tunes too (here the export itself, on race/high).
    again = tmp_path / "again"
    args = ["--run", str(hf_dir), "--task", "race/high", "--data", str(data)]
    _finetune([*args, "--output", str(again), "--epochs", "1"])
    assert load(again).spec.name == "race/high"


def test_swag_finetunes_from_its_csv(tiny_run, tmp_path) -> None:
    data, tuned = tmp_path / "swag", tmp_path / "tuned"
    write_swag(data, seed=2, rows=240)
    args = ["--run", str(tiny_run), "--task", "swag", "--data", str(data)]
    _finetune([*args, "--output", str(tuned), "--epochs", "4"])
    info = json.loads((tuned / "finetune.json").read_text())
    assert info["examples"] == {"train": 240, "dev": 80}
    assert info["dev"]["accuracy"] >= 90.0, info["epochs"]


def test_a_task_file_may_keep_its_options_in_one_list_field(tiny_run, tmp_path) -> None:
    spec = TaskSpec.from_json(
        {"name": "mine", "shape": "choice", "format": "jsonl", "text_a": "story",
         "text_b": "q", "options": "choices", "label": "gold", "labels": ["1", "2", "3"],
         "files": {"train": "t.jsonl"}},
    )  # fmt: skip
    rows = [{"story": "a b", "q": "c", "choices": ["x", "y", "z"], "gold": "2"}]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = read_choices(spec, tmp_path, "train").items
    assert got[0].options == ("x", "y", "z") and got[0].label == 1.0


def test_the_documented_choice_task_file_runs(tiny_run, tmp_path) -> None:
    """docs/finetune.md's multiple-choice TOML example, as written."""
    docs = (Path(__file__).parents[3] / "docs" / "finetune.md").read_text(encoding="utf-8")
    toml = re.findall(r"```toml\n(.*?)```", docs, re.DOTALL)[1]
    assert 'shape = "choice"' in toml
    (tmp_path / "stories.toml").write_text(toml, encoding="utf-8")
    data = tmp_path / "stories"
    data.mkdir()
    rng = random.Random(5)
    for split, n in (("train", 24), ("dev", 9)):
        rows = []
        for i in range(n):
            _, options, answer = _question(rng)
            rows.append({"story": f"story {i}", "question": "then ?", "endings": options[:3],
                         "answer": str(1 + answer % 3)})  # fmt: skip
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["--run", str(tiny_run), "--task", str(tmp_path / "stories.toml")]
    _finetune([*args, "--data", str(data), "--output", str(tmp_path / "t"), "--epochs", "1"])
    info = json.loads((tmp_path / "t" / "finetune.json").read_text())
    assert info["examples"] == {"train": 24, "dev": 9} and set(info["dev"]) == {"accuracy"}


def test_multitask_takes_multiple_choice_beside_classification(tiny_run, tmp_path) -> None:
    race, sst2, out = tmp_path / "RACE", tmp_path / "sst2", tmp_path / "mtdnn"
    write_race(race, seed=3, articles=60)
    write_sst2(sst2, seed=3, rows=120)
    tasks = ["--task", "race", "--data", str(race), "--task", "glue/sst2", "--data", str(sst2)]
    _finetune(["--run", str(tiny_run), *tasks, "--output", str(out), "--epochs", "3"])
    summary = json.loads((out / "multitask.json").read_text())
    assert set(summary["dev"]) == {"race", "glue/sst2"}
    assert summary["dev"]["race"]["accuracy"] >= 70.0, summary["multitask_epochs"]
    assert load(out / "race").spec.shape == "choice"


def _race_article(**changes) -> str:
    article = {"article": "a text", "questions": ["q1", "q2"], "answers": ["A", "B"],
               "options": [["a", "b", "c", "d"], ["a", "b", "c", "d"]]}  # fmt: skip
    article.update(changes)
    return json.dumps(article)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_race_article(options=[["a", "b", "c", "d"], ["a", "b", "c"]]),
         r"2\.txt: question 2: 3 options, the task has 4 \(A, B, C, D\)$"),
        (_race_article(answers=["A", "E"]),
         r"2\.txt: question 2: answer 'E' is not one of A, B, C, D$"),
        (_race_article(answers=["A"]),
         r"2\.txt: questions, options and answers differ in number "
         r"\(questions 2, options 2, answers 1\)$"),
        ("{not json", r"2\.txt: not JSON \("),
        (json.dumps({"article": "x"}), r"2\.txt: not a RACE article"),
    ],
)  # fmt: skip
def test_a_bad_race_file_is_one_line_naming_file_and_question(
    tiny_run, tmp_path, capsys, text, message
) -> None:
    data = tmp_path / "RACE"
    for split in ("train", "dev"):
        (data / split / "high").mkdir(parents=True)
        (data / split / "high" / "1.txt").write_text(_race_article())
    (data / "dev" / "high" / "2.txt").write_text(text)
    args = ["finetune", "--run", str(tiny_run), "--task", "race", "--data", str(data)]
    capsys.readouterr()
    assert main([*args, "--output", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert str(data / "dev" / "high") in err
    assert re.search(message, err), err


def test_a_bad_swag_row_is_one_line_naming_file_and_line(tiny_run, tmp_path, capsys) -> None:
    data = tmp_path / "swag"
    write_swag(data, seed=4, rows=12)
    with (data / "val.csv").open("a", encoding="utf-8", newline="") as f:
        csv.writer(f).writerow([99, "v", 0, "s", "s", "x", "gold", "a", "b", "c", "d", "7"])
    args = ["finetune", "--run", str(tiny_run), "--task", "swag", "--data", str(data)]
    capsys.readouterr()
    assert main([*args, "--output", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("val.csv:6: label '7' is not one of 0, 1, 2, 3"), err


def test_task_files_that_cannot_be_multiple_choice_are_refused() -> None:
    from clozeworks.schemas.errors import UsageError

    base = {"name": "t", "shape": "choice", "format": "csv", "text_a": "c", "label": "l",
            "labels": ["0", "1"]}  # fmt: skip
    with pytest.raises(UsageError, match="multiple choice, and only it, has options"):
        TaskSpec.from_json(base)
    with pytest.raises(UsageError, match="3 option columns, 2 labels"):
        TaskSpec.from_json({**base, "options": ["a", "b", "c"]})
    with pytest.raises(UsageError, match="multiple choice, and only it, has options"):
        TaskSpec.from_json({**base, "shape": "single", "options": ["a", "b"]})
    with pytest.raises(UsageError, match="one field holding the options is for jsonl"):
        TaskSpec.from_json({**base, "options": "a"})
    with pytest.raises(UsageError, match="metrics are"):
        TaskSpec.from_json({**base, "options": ["a", "b"], "metrics": ["pearson"]})
