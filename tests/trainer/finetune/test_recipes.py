"""Fine-tuning a small model with its default recipe learns; BERT's recipe (2e-5, batch 32,
3 epochs) on the same small model does not: the default follows the model's size."""

from __future__ import annotations

import json
import statistics

import pytest

from clozeworks.cli import main
from clozeworks.corpus.text.probe import write_package_task

SEEDS = (0, 1, 2)


def _accuracy(tiny_run, data, out, seed: int, *flags: str) -> dict:
    args = ["finetune", "--run", str(tiny_run), "--task", str(data / "task.toml")]
    args += ["--data", str(data), "--output", str(out), "--seed", str(seed), "--random-init"]
    assert main([*args, "--no-progress", *flags]) == 0
    return json.loads((out / "finetune.json").read_text())


@pytest.mark.slow
def test_the_default_recipe_learns_where_berts_does_not(tiny_run, tmp_path, capsys) -> None:
    data = tmp_path / "probe"
    write_package_task(data, train_per_class=100, dev_per_class=60)
    runs: dict[str, list[float]] = {"default": [], "bert": []}
    for seed in SEEDS:
        default = _accuracy(tiny_run, data, tmp_path / f"d{seed}", seed)
        assert default["settings"]["recipe"] == "small"
        runs["default"].append(default["dev"]["accuracy"])
        bert = _accuracy(tiny_run, data, tmp_path / f"b{seed}", seed, "--recipe", "bert")
        runs["bert"].append(bert["dev"]["accuracy"])
    # Four balanced classes: 25% is chance and what the majority class scores.
    assert statistics.mean(runs["bert"]) < 35.0, runs
    assert min(runs["default"]) > 40.0, runs
    # Each epoch's line reaches stderr as the epoch ends (the test's stderr is a pipe).
    err = capsys.readouterr().err
    assert err.count("epoch 1/10: train loss") == len(SEEDS), err
    assert err.count("epoch 3/3: train loss") == len(SEEDS), err
    print(f"dev accuracy by recipe, seeds {SEEDS}: {runs}")  # shown with pytest -rP


def test_the_documented_task_file_runs(tiny_run, tmp_path, capsys) -> None:
    """docs/finetune.md's TOML example, as written, on review files made here."""
    import re
    from pathlib import Path

    docs = (Path(__file__).parents[3] / "docs" / "finetune.md").read_text(encoding="utf-8")
    toml = re.findall(r"```toml\n(.*?)```", docs, re.DOTALL)[0]  # the first: reviews
    (tmp_path / "reviews.toml").write_text(toml, encoding="utf-8")
    data = tmp_path / "reviews"
    data.mkdir()
    moods = {"bad": "broke after a day", "fine": "does the job", "good": "works great"}
    for split, n in (("train", 12), ("dev", 6)):
        rows = [{"review": f"it {moods[m]} {i}", "mood": m} for i in range(n) for m in moods]
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["finetune", "--run", str(tiny_run), "--task", str(tmp_path / "reviews.toml")]
    out = tmp_path / "tuned"
    assert main([*args, "--data", str(data), "--output", str(out), "--epochs", "1"]) == 0
    info = json.loads((out / "finetune.json").read_text())
    assert info["examples"] == {"train": 36, "dev": 18}
    assert set(info["dev"]) == {"accuracy", "f1_macro"}
    assert "epoch 1/1: train loss" in capsys.readouterr().err
