"""`cloze finetune` / `cloze evaluate` end to end on a tiny pretrained run, and the export of
the fine-tuned model to transformers with the same logits."""

import json
import random

import pytest
import torch
import transformers

from clozeworks.cli import main
from clozeworks.trainer.finetune.model import load_backbone
from clozeworks.trainer.finetune.run import run_finetune
from clozeworks.trainer.finetune.store import load
from clozeworks.trainer.finetune.tasks import BUILTIN
from clozeworks.trainer.finetune.train import FinetuneSettings

# Two disjoint word sets: a sentence made of one set's words has that set's label.
POSITIVE = ["value", "return", "object", "string", "list", "file"]
NEGATIVE = ["error", "raise", "none", "default", "argument", "type"]


def write_sst2(directory, seed: int, rows: int) -> None:
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", rows), ("dev", rows // 4)):
        lines = ["sentence\tlabel"]
        for _ in range(n):
            label = rng.randrange(2)
            words = POSITIVE if label else NEGATIVE
            lines.append(
                " ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) + f"\t{label}"
            )
        (directory / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_finetune_learns_a_separable_task_and_evaluate_agrees(tiny_run, tmp_path, capsys) -> None:
    data, out = tmp_path / "sst2", tmp_path / "tuned"
    write_sst2(data, seed=0, rows=240)
    flags = ["--lr", "1e-3", "--epochs", "4", "--batch-size", "16", "--no-progress"]
    common = ["--run", str(tiny_run), "--task", "glue/sst2", "--data", str(data)]
    assert main(["finetune", *common, "--output", str(out), *flags]) == 0
    info = json.loads((out / "finetune.json").read_text())
    assert [e["epoch"] for e in info["epochs"]] == [1, 2, 3, 4]
    assert info["examples"] == {"train": 240, "dev": 60}
    assert info["dev"]["accuracy"] >= 90.0, info["epochs"]
    assert info["epochs"][-1]["train_loss"] < info["epochs"][0]["train_loss"]
    capsys.readouterr()
    assert main(["evaluate", "--model", str(out), "--data", str(data), "--device", "cpu"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["accuracy"] == pytest.approx(info["dev"]["accuracy"])
    scored = json.loads((out / "eval.json").read_text())["dev"]
    assert scored["examples"] == 60
    # Per-example predictions and the confusion matrix agree with the accuracy.
    rows = [json.loads(line) for line in (out / "predictions-dev.jsonl").read_text().splitlines()]
    assert [r["example"] for r in rows] == list(range(60))
    assert all(sum(r["probabilities"].values()) == pytest.approx(1, abs=1e-4) for r in rows)
    right = sum(r["label"] == r["prediction"] for r in rows)
    assert 100 * right / 60 == pytest.approx(printed["accuracy"])
    matrix = scored["confusion"]["matrix"]
    assert scored["confusion"]["labels"] == ["0", "1"] and sum(map(sum, matrix)) == 60
    assert matrix[0][0] + matrix[1][1] == right
    assert main(["inspect", str(out)]) == 0
    shown = capsys.readouterr().out
    assert f"finetuned: {out}" in shown and "task glue/sst2 (single)" in shown
    assert f"eval dev: accuracy {info['dev']['accuracy']:.2f}" in shown
    # The same run again with the same seed gives the same model (everything is seeded).
    again = tmp_path / "again"
    assert main(["finetune", *common, "--output", str(again), *flags]) == 0
    a, b = load(out).model.state_dict(), load(again).model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # A non-empty output is refused without --overwrite.
    assert main(["finetune", *common, "--output", str(out), *flags]) == 2


def test_finetuned_model_exports_to_transformers_with_the_same_logits(tiny_run, tmp_path) -> None:
    data, out = tmp_path / "sst2", tmp_path / "tuned"
    write_sst2(data, seed=1, rows=32)
    args = ["finetune", "--run", str(tiny_run), "--task", "glue/sst2", "--data", str(data)]
    assert main([*args, "--output", str(out), "--epochs", "1", "--no-progress"]) == 0
    tuned = load(out)
    assert main(["export", "--run", str(out), "--output", str(tmp_path / "hf")]) == 0
    hf, info = transformers.AutoModelForSequenceClassification.from_pretrained(
        tmp_path / "hf", output_loading_info=True
    )
    assert type(hf).__name__ == "BertForSequenceClassification"
    assert not info["unexpected_keys"] and not info["missing_keys"]
    assert hf.config.id2label == {0: "0", 1: "1"}
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    batch = tok(
        ["value list file", "error raise"],
        ["string", "none type default"],
        padding=True,
        return_tensors="pt",
    )
    with torch.no_grad():
        ours = tuned.model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        theirs = hf.eval()(**batch).logits
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=0)


def test_a_bad_row_is_one_line_naming_file_and_line(tiny_run, tmp_path, capsys) -> None:
    data = tmp_path / "sst2"
    write_sst2(data, seed=2, rows=16)
    train = data / "train.tsv"
    lines = train.read_text().splitlines()
    lines[5] = "some words\tmaybe"
    train.write_text("\n".join(lines) + "\n")
    args = ["finetune", "--run", str(tiny_run), "--task", "glue/sst2", "--data", str(data)]
    assert main([*args, "--output", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{train}:6: label 'maybe' is not one of 0, 1" in err
    assert "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_sweep_keeps_the_learning_rate_with_the_best_dev_score(tiny_run, tmp_path) -> None:
    data, out = tmp_path / "sst2", tmp_path / "tuned"
    write_sst2(data, seed=0, rows=240)
    settings = FinetuneSettings(batch_size=16, epochs=4)
    info = run_finetune(tiny_run, BUILTIN["glue/sst2"], data, out, settings, sweep=(1e-6, 1e-3))
    scores = {t["learning_rate"]: t["dev"]["accuracy"] for t in info["sweep"]}
    assert scores[1e-3] > scores[1e-6] + 20, scores  # 1e-6 barely moves in 60 steps
    assert info["settings"]["learning_rate"] == 1e-3
    assert info["dev"]["accuracy"] == scores[1e-3]
    assert json.loads((out / "finetune.json").read_text())["settings"]["learning_rate"] == 1e-3


@pytest.mark.parametrize(
    ("recipe", "grid"),
    [("auto", [1e-3, 5e-4, 3e-4, 1e-4]), ("small", [1e-3, 5e-4, 3e-4, 1e-4]),
     ("bert", [5e-5, 4e-5, 3e-5, 2e-5])],
)  # fmt: skip
def test_cli_sweep_flag_tries_the_recipes_grid(tiny_run, tmp_path, capsys, recipe, grid) -> None:
    data = tmp_path / "sst2"
    write_sst2(data, seed=4, rows=16)
    args = ["finetune", "--run", str(tiny_run), "--task", "glue/sst2", "--data", str(data)]
    out = ["--output", str(tmp_path / "o"), "--recipe", recipe]
    assert main([*args, *out, "--sweep", "--epochs", "1", "--no-progress"]) == 0
    info = json.loads((tmp_path / "o" / "finetune.json").read_text())
    assert [t["learning_rate"] for t in info["sweep"]] == grid
    # The tiny run's hidden size is 32: auto is the small recipe; --epochs overrides it.
    expected = "bert" if recipe == "bert" else "small"
    assert info["settings"]["recipe"] == expected and info["settings"]["epochs"] == 1
    assert info["settings"]["batch_size"] == {"bert": 32, "small": 16}[expected]


PEOPLE = ["peter", "maria", "john", "anna"]
PLACES = ["paris", "london", "berlin", "tokyo"]
FILLER = ["the", "value", "of", "list", "returns", "file", "and", "string"]


def write_conll(directory, seed: int, sentences: int) -> None:
    """IOB2 tags, entities of one word: what a tiny model learns in a few steps (the tags'
    chunking is tested on its own in test_tokens.py)."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for split, n in (("train.txt", sentences), ("valid.txt", sentences // 4)):
        lines = ["-DOCSTART- -X- -X- O", ""]
        for _ in range(n):
            for _ in range(rng.randint(3, 8)):
                kind = rng.random()
                if kind < 0.2:
                    lines.append(f"{rng.choice(PEOPLE)} NNP B-NP B-PER")
                elif kind < 0.35:
                    lines.append(f"{rng.choice(PLACES)} NNP B-NP B-LOC")
                else:
                    lines.append(f"{rng.choice(FILLER)} NN I-NP O")
            lines.append("")
        (directory / split).write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_conll_finetune_finds_entities_and_exports_token_logits(tiny_run, tmp_path) -> None:
    data, out = tmp_path / "conll", tmp_path / "ner"
    write_conll(data, seed=0, sentences=200)
    args = ["finetune", "--run", str(tiny_run), "--task", "conll2003", "--data", str(data)]
    flags = ["--lr", "2e-3", "--epochs", "6", "--batch-size", "16", "--no-progress"]
    assert main([*args, "--output", str(out), *flags]) == 0
    info = json.loads((out / "finetune.json").read_text())
    assert info["dev"]["entity_f1"] >= 80.0, info["epochs"]
    assert main(["evaluate", "--model", str(out), "--data", str(data)]) == 0
    assert json.loads((out / "eval.json").read_text())["dev"]["entity_f1"] == pytest.approx(
        info["dev"]["entity_f1"]
    )
    assert main(["export", "--run", str(out), "--output", str(tmp_path / "hf")]) == 0
    hf = transformers.AutoModelForTokenClassification.from_pretrained(tmp_path / "hf").eval()
    assert type(hf).__name__ == "BertForTokenClassification"
    assert hf.config.id2label[1] == "B-PER"
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    batch = tok(
        [["peter", "returns", "paris"], ["the", "list"]],
        is_split_into_words=True,
        padding=True,
        return_tensors="pt",
    )
    tuned = load(out)
    with torch.no_grad():
        ours = tuned.model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        theirs = hf(**batch).logits
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(theirs[real], ours[real], atol=1e-4, rtol=0)


def write_squad(directory, seed: int, contexts: int) -> None:
    """Each context names one person among filler words; the question asks who."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for name, n in (("train-v1.1.json", contexts), ("dev-v1.1.json", contexts // 4)):
        paragraphs = []
        for i in range(n):
            before = " ".join(rng.choice(FILLER) for _ in range(rng.randint(2, 12)))
            after = " ".join(rng.choice(FILLER) for _ in range(rng.randint(2, 12)))
            person = rng.choice(PEOPLE)
            context = f"{before} {person} {after}."
            qa = {
                "id": f"{name}-{i}",
                "question": "who is it?",
                "answers": [{"text": person, "answer_start": len(before) + 1}],
            }
            paragraphs.append({"context": context, "qas": [qa]})
        payload = {"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}
        (directory / name).write_text(json.dumps(payload), encoding="utf-8")


def test_squad_finetune_answers_and_exports_start_end_logits(tiny_run, tmp_path) -> None:
    data, out = tmp_path / "squad", tmp_path / "qa"
    write_squad(data, seed=0, contexts=240)
    args = ["finetune", "--run", str(tiny_run), "--task", "squad", "--data", str(data)]
    flags = ["--lr", "1e-3", "--epochs", "4", "--batch-size", "16", "--no-progress"]
    assert main([*args, "--output", str(out), *flags]) == 0
    info = json.loads((out / "finetune.json").read_text())
    assert info["dev"]["exact_match"] >= 80.0 and info["dev"]["f1"] >= 80.0, info["epochs"]
    assert main(["export", "--run", str(out), "--output", str(tmp_path / "hf")]) == 0
    hf = transformers.AutoModelForQuestionAnswering.from_pretrained(tmp_path / "hf").eval()
    assert type(hf).__name__ == "BertForQuestionAnswering"
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    batch = tok(["who is it?"], ["the list of maria and file."], return_tensors="pt")
    tuned = load(out)
    with torch.no_grad():
        ours = tuned.model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        theirs = hf(**batch)
    torch.testing.assert_close(theirs.start_logits, ours[..., 0], atol=1e-4, rtol=0)


def test_multitask_shares_one_encoder_and_samples_tasks_by_size(tiny_run, tmp_path, capsys) -> None:
    sst2, conll, out = tmp_path / "sst2", tmp_path / "conll", tmp_path / "mtdnn"
    write_sst2(sst2, seed=0, rows=240)
    write_conll(conll, seed=0, sentences=160)
    args = ["finetune", "--run", str(tiny_run), "--output", str(out), "--no-progress"]
    args += [
        "--task",
        "glue/sst2",
        "--data",
        str(sst2),
        "--task",
        "conll2003",
        "--data",
        str(conll),
    ]
    assert main([*args, "--lr", "2e-3", "--epochs", "6", "--batch-size", "16"]) == 0
    summary = json.loads((out / "multitask.json").read_text())
    assert summary["batches_per_epoch"] == {"glue/sst2": 15, "conll2003": 10}
    assert summary["dev"]["glue/sst2"]["accuracy"] >= 90.0, summary["multitask_epochs"]
    assert summary["dev"]["conll2003"]["entity_f1"] >= 80.0, summary["multitask_epochs"]
    a, b = load(out / "glue-sst2"), load(out / "conll2003")
    encoder_a, encoder_b = a.model.encoder.state_dict(), b.model.encoder.state_dict()
    assert all(torch.equal(encoder_a[k], encoder_b[k]) for k in encoder_a)  # one encoder
    assert main(["evaluate", "--model", str(out / "conll2003"), "--data", str(conll)]) == 0
    capsys.readouterr()
    assert main(["inspect", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "multitask"
    # MT-DNN's second stage: each task's model fine-tuned alone from the shared encoder.
    again = tmp_path / "mtdnn-ft"
    more = ["--epochs", "1", "--lr", "1e-3", "--batch-size", "16", "--then-finetune"]
    assert main([*[a if a != str(out) else str(again) for a in args], *more]) == 0
    summary = json.loads((again / "multitask.json").read_text())
    assert set(summary["finetuned_dev"]) == {"glue/sst2", "conll2003"}
    a, b = load(again / "glue-sst2"), load(again / "conll2003")
    encoder_a, encoder_b = a.model.encoder.state_dict(), b.model.encoder.state_dict()
    assert not all(torch.equal(encoder_a[k], encoder_b[k]) for k in encoder_a)


def test_a_step_directory_fine_tunes_that_checkpoint(nsp_shards, tmp_path) -> None:
    config = tmp_path / "small.toml"
    config.write_text(
        "[model]\nhidden_size = 32\nnum_layers = 2\nnum_heads = 2\nintermediate_size = 64\n",
        encoding="utf-8",
    )
    run = tmp_path / "run"
    args = ["train", "--data", str(nsp_shards), "--output", str(run), "--config", str(config)]
    args += ["--max-steps", "4", "--save-every", "2", "--batch-size", "4", "--warmup", "1"]
    assert main([*args, "--keep", "2", "--no-progress"]) == 0
    first = load_backbone(run / "step-0000002").encoder.state_dict()
    same = load_backbone(run, step=2).encoder.state_dict()
    last = load_backbone(run).encoder.state_dict()
    assert all(torch.equal(first[k], same[k]) for k in first)
    assert not all(torch.equal(first[k], last[k]) for k in first)


def test_finetune_starts_from_an_exported_transformers_directory(tiny_run, tmp_path) -> None:
    hf_dir, data = tmp_path / "hf", tmp_path / "sst2"
    assert main(["export", "--run", str(tiny_run), "--output", str(hf_dir)]) == 0
    write_sst2(data, seed=5, rows=32)
    from_run, from_hf = load_backbone(tiny_run), load_backbone(hf_dir)
    a, b = from_run.encoder.state_dict(), from_hf.encoder.state_dict()
    assert all(torch.allclose(a[k], b[k]) for k in a)  # the same encoder either way
    args = ["finetune", "--run", str(hf_dir), "--task", "glue/sst2", "--data", str(data)]
    assert main([*args, "--output", str(tmp_path / "o"), "--epochs", "1", "--no-progress"]) == 0
    assert json.loads((tmp_path / "o" / "finetune.json").read_text())["source"] == str(hf_dir)


def test_export_draws_no_progress_bar_without_a_terminal(tiny_run, tmp_path, capsys) -> None:
    # under nohup, Slurm or a pipe a bar is only noise in the log (issue 33, item 8)
    assert main(["export", "--run", str(tiny_run), "--output", str(tmp_path / "hf")]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.strip() == f"wrote {tmp_path / 'hf'}"


def test_evaluate_without_readable_weights_is_one_line(tiny_run, tmp_path, capsys) -> None:
    data, out = tmp_path / "sst2", tmp_path / "tuned"
    write_sst2(data, seed=1, rows=32)
    args = ["finetune", "--run", str(tiny_run), "--task", "glue/sst2", "--data", str(data)]
    assert main([*args, "--output", str(out), "--epochs", "1", "--no-progress"]) == 0
    capsys.readouterr()
    weights = out / "model.safetensors"
    evaluate = ["evaluate", "--model", str(out), "--data", str(data), "--device", "cpu"]
    for damage, said in (
        (b"not safetensors", "not a readable safetensors file"),
        (None, "missing"),
    ):
        if damage is None:
            weights.unlink()
        else:
            weights.write_bytes(damage)
        assert main(evaluate) == 2  # was a traceback (issue 33)
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and err.startswith(f"cloze evaluate: error: {weights}: {said}"), err
