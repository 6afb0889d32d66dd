"""finetune -> export -> transformers, for every source `cloze finetune` accepts (a run, a
step directory, a transformers directory) and every task kind (single sentence, pair,
regression, token classification, question answering, an MT-DNN task model): the exported
directory loads with `AutoModelFor...` and `AutoTokenizer`, the tokenizer gives our ids,
the model our logits (to 1e-4) and, through our scorer, `cloze evaluate`'s dev score
(issue 40: a transformers source's config.json and weights used to overwrite the export)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from clozeworks.cli import main
from clozeworks.corpus.vocab.files import DIRECTORY_FILES
from clozeworks.trainer.finetune.run import _encode_split, _pad_id, _tokenizer
from clozeworks.trainer.finetune.store import load
from clozeworks.trainer.finetune.tasks import BUILTIN, TaskSpec
from clozeworks.trainer.finetune.train import batches, predict, score
from tests.trainer.finetune.test_finetune_cli import write_conll, write_squad, write_sst2

SOURCES = ("run", "step", "transformers")
TASKS = ("glue/sst2", "glue/mrpc", "glue/stsb", "conll2003", "squad", "mt-dnn")
AUTO = {
    "single": transformers.AutoModelForSequenceClassification,
    "pair": transformers.AutoModelForSequenceClassification,
    "regression": transformers.AutoModelForSequenceClassification,
    "tokens": transformers.AutoModelForTokenClassification,
    "qa": transformers.AutoModelForQuestionAnswering,
}
HEAD = {"tokens": "TokenClassification", "qa": "QuestionAnswering"}
# The largest logit difference per cell, for the note (printed with -s).
DIFFERENCES: dict[tuple[str, str], float] = {}


@pytest.fixture(scope="session")
def sources(tiny_run, tmp_path_factory) -> dict[str, Path]:
    hf = tmp_path_factory.mktemp("source") / "hf"
    assert main(["export", "--run", str(tiny_run), "--output", str(hf)]) == 0
    step = sorted(tiny_run.glob("step-*"))[-1]
    return {"run": tiny_run, "step": step, "transformers": hf}


def _write_pairs(directory: Path, seed: int, rows: int, regression: bool) -> None:
    """MRPC's or STS-B's columns: a pair of word lists, labelled by whether they overlap."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    words = ["value", "return", "object", "string", "error", "raise", "none", "type"]
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
    if regression:
        header = "sentence1\tsentence2\tscore"
    for split, n in (("train", rows), ("dev", rows // 2)):
        lines = [header]
        for i in range(n):
            a = [rng.choice(words) for _ in range(rng.randint(2, 7))]
            b = [rng.choice(words) for _ in range(rng.randint(2, 7))]
            overlap = len(set(a) & set(b))
            if regression:
                lines.append(f"{' '.join(a)}\t{' '.join(b)}\t{min(5.0, overlap * 1.25):.2f}")
            else:
                lines.append(f"{int(overlap > 1)}\t{i}\t{i + n}\t{' '.join(a)}\t{' '.join(b)}")
        (directory / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="session")
def task_data(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tasks")
    write_sst2(root / "sst2", seed=7, rows=48)
    _write_pairs(root / "mrpc", seed=7, rows=48, regression=False)
    _write_pairs(root / "stsb", seed=8, rows=48, regression=True)
    write_conll(root / "conll", seed=7, sentences=48)
    write_squad(root / "squad", seed=7, contexts=48)
    return {
        "glue/sst2": root / "sst2",
        "glue/mrpc": root / "mrpc",
        "glue/stsb": root / "stsb",
        "conll2003": root / "conll",
        "squad": root / "squad",
    }


def _finetuned(source: Path, task: str, data: dict[str, Path], out: Path) -> list[Path]:
    """The fine-tuned model directories of a cell: one, or MT-DNN's one per task."""
    flags = ["--epochs", "1", "--batch-size", "16", "--lr", "1e-3", "--no-progress"]
    if task == "mt-dnn":
        tasks = ["--task", "glue/sst2", "--data", str(data["glue/sst2"])]
        tasks += ["--task", "conll2003", "--data", str(data["conll2003"])]
        assert main(["finetune", "--run", str(source), *tasks, "--output", str(out), *flags]) == 0
        return [out / "glue-sst2", out / "conll2003"]
    args = ["finetune", "--run", str(source), "--task", task, "--data", str(data[task])]
    assert main([*args, "--output", str(out), *flags]) == 0
    return [out]


def _hf_outputs(hf, spec: TaskSpec, encoded, pad_id: int) -> list[np.ndarray]:
    """transformers' logits for every example, in our predict()'s shapes: [C], [pieces, C]
    for a token task, [pieces, 2] (start, end) for a QA window."""
    out: list[np.ndarray] = []
    rows = list(range(len(encoded.ids)))
    with torch.no_grad():
        for batch, _ in batches(encoded, 16, rows, pad_id, torch.device("cpu")):
            result = hf(**batch)
            if spec.shape == "qa":
                logits = torch.stack([result.start_logits, result.end_logits], dim=-1)
            else:
                logits = result.logits
            for row in logits.float().numpy():
                i = len(out)
                out.append(row[: len(encoded.ids[i])] if row.ndim == 2 else row)
    return out


def _hf_tokenizer_ids(tok, spec: TaskSpec, data: Path, max_len: int) -> list[list[int]]:
    """AutoTokenizer's ids of the dev split, as `cloze finetune` feeds its examples."""
    if spec.shape == "tokens":
        from clozeworks.trainer.finetune.tokens import read_sentences

        words = [s.words for s in read_sentences(spec, data, "dev").items]
        return tok(words, is_split_into_words=True, truncation=True, max_length=max_len)[
            "input_ids"
        ]
    if spec.shape == "qa":
        from clozeworks.trainer.finetune.qa import read_questions

        qs = read_questions(spec, data, "dev").items
        return tok([q.question for q in qs], [q.context for q in qs])["input_ids"]
    from clozeworks.trainer.finetune.readers import read_examples

    examples = read_examples(spec, data, "dev").items
    if spec.text_b is None:
        return tok([e.text_a for e in examples], truncation=True, max_length=max_len)["input_ids"]
    pairs = ([e.text_a for e in examples], [e.text_b for e in examples])
    return tok(*pairs, truncation="longest_first", max_length=max_len)["input_ids"]


def _check_export(tuned_dir: Path, data: Path, hf_dir: Path, capsys) -> float:
    """The export of `tuned_dir` against the fine-tuned model itself; the largest logit
    difference."""
    tuned = load(tuned_dir)
    spec = tuned.spec
    assert main(["evaluate", "--model", str(tuned_dir), "--data", str(data)]) == 0
    evaluated = json.loads((tuned_dir / "eval.json").read_text())["dev"]
    assert main(["export", "--run", str(tuned_dir), "--output", str(hf_dir)]) == 0
    model, info = AUTO[spec.shape].from_pretrained(hf_dir, output_loading_info=True)
    hf = model.eval()
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert type(hf).__name__ == f"BertFor{HEAD.get(spec.shape, 'SequenceClassification')}"
    if spec.shape != "qa":
        assert [hf.config.id2label[i] for i in range(len(spec.labels))] == list(spec.labels)
    # Only tokenizer files beside the fine-tuned model, and the model's files in the export.
    assert {p.name for p in (tuned_dir / "tokenizer").iterdir()} <= set(DIRECTORY_FILES)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in hf_dir.iterdir()
    }
    tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    max_len = int(tuned.info["settings"]["max_seq_len"])
    tokenizer = _tokenizer(tuned.tokenizer)
    encoded, _ = _encode_split(spec, data, "dev", tokenizer, max_len)
    assert _hf_tokenizer_ids(tok, spec, data, max_len) == encoded.ids
    pad_id = _pad_id(tokenizer, tuned.config.model.pad_token_id)
    ours = predict(tuned.model, encoded, 16, pad_id)
    theirs = _hf_outputs(hf, spec, encoded, pad_id)
    difference = max(float(np.abs(a - b).max()) for a, b in zip(ours, theirs, strict=True))
    assert difference <= 1e-4
    scored = score(spec, theirs, encoded)
    # A class is an argmax, so the same; a regression score moves with the logits' last
    # digits (a barely trained model's predictions lie close together): 0.01 points.
    tolerance = 0.01 if spec.shape == "regression" else 1e-9
    assert scored == pytest.approx({k: evaluated[k] for k in scored}, abs=tolerance)
    capsys.readouterr()
    assert main(["inspect", str(hf_dir), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["kind"] == "transformers" and shown["class"] == type(hf).__name__
    assert shown["finetuned"] and shown["task"] == spec.name
    if spec.shape != "qa":
        assert shown["labels"] == list(spec.labels or ("score",))
    return difference


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("source", SOURCES)
def test_finetune_export_gives_our_logits_and_dev_score(
    source, task, sources, task_data, tmp_path, capsys
) -> None:
    tuned_dirs = _finetuned(sources[source], task, task_data, tmp_path / "tuned")
    worst = 0.0
    for i, tuned_dir in enumerate(tuned_dirs):
        spec = load(tuned_dir).spec
        data = task_data[spec.name]
        worst = max(worst, _check_export(tuned_dir, data, tmp_path / f"hf{i}", capsys))
    DIFFERENCES[(source, task)] = worst
    with capsys.disabled():
        print(f"\n{source} x {task}: largest logit difference {worst:.2e}")


def test_exported_weights_are_the_finetuned_ones_not_the_sources(sources, task_data, tmp_path):
    """The reported defect itself: from a transformers directory, the export's weights
    and config.json are the fine-tuned classifier's, never the source's copied over them."""
    tuned = _finetuned(sources["transformers"], "glue/sst2", task_data, tmp_path / "t")[0]
    assert main(["export", "--run", str(tuned), "--output", str(tmp_path / "hf")]) == 0
    source_weights = (sources["transformers"] / "model.safetensors").read_bytes()
    assert (tmp_path / "hf" / "model.safetensors").read_bytes() != source_weights
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["finetuning_task"] == "glue/sst2"
    assert not (tuned / "tokenizer" / "config.json").exists()


def test_inspect_says_what_an_export_holds(sources, task_data, tmp_path, capsys) -> None:
    tuned = _finetuned(sources["run"], "conll2003", task_data, tmp_path / "t")[0]
    assert main(["export", "--run", str(tuned), "--output", str(tmp_path / "hf")]) == 0
    capsys.readouterr()
    assert main(["inspect", str(tmp_path / "hf")]) == 0
    shown = capsys.readouterr().out
    assert f"transformers: {tmp_path / 'hf'}" in shown
    assert "BertForTokenClassification (bert), 2 layers, hidden 32" in shown
    assert "fine-tuned for task conll2003" in shown
    assert "labels O, B-PER, I-PER" in shown
    # a pretraining export: its class, and no task
    assert main(["inspect", str(sources["transformers"]), "--json"]) == 0
    pretrained = json.loads(capsys.readouterr().out)
    assert pretrained["class"] == "BertForPreTraining" and not pretrained["finetuned"]
    # Uncased WordPiece: the tokenizer.json's own class (BertTokenizer would rebuild BERT's
    # normalizer, which breaks Hangul; issue 36).
    assert pretrained["task"] is None and pretrained["tokenizer"] == "PreTrainedTokenizerFast"


def test_a_tokenizer_file_the_model_wrote_too_is_an_error(tmp_path) -> None:
    from clozeworks.corpus.vocab.files import copy_tokenizer_files
    from clozeworks.schemas.errors import BadInputError

    src, dest = tmp_path / "tok", tmp_path / "model"
    src.mkdir()
    dest.mkdir()
    (src / "tokenizer.json").write_text("{}")
    (src / "config.json").write_text('{"model": "not copied"}')
    (dest / "config.json").write_text('{"model": "kept"}')
    assert copy_tokenizer_files(src, dest) == ["tokenizer.json"]
    assert json.loads((dest / "config.json").read_text()) == {"model": "kept"}
    with pytest.raises(BadInputError, match=r"tokenizer\.json: written already"):
        copy_tokenizer_files(src, dest)


def test_builtin_task_names_are_the_ones_the_matrix_covers() -> None:
    shapes = {BUILTIN[t].shape for t in TASKS if t in BUILTIN}
    assert shapes == {"single", "pair", "regression", "tokens", "qa"}
