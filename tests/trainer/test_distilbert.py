"""The distilbert family end to end: a run trains, exports as transformers'
DistilBertForMaskedLM with our logits, is read back by `--init-from` (its config's `dim`,
`n_layers`, ... and tensor names), fine-tunes from the export, and refuses a sentence
objective in one line."""

from __future__ import annotations

import json

import torch
import transformers

from clozeworks.cli import main
from clozeworks.trainer.export import load_run


def _config(tmp_path) -> str:
    path = tmp_path / "distil.toml"
    path.write_text(
        '[model]\nfamily = "distilbert"\nhidden_size = 32\nnum_layers = 2\nnum_heads = 2\n'
        "intermediate_size = 64\ntype_vocab_size = 0\n[optim]\nwarmup_steps = 1\n",
        encoding="utf-8",
    )
    return str(path)


def test_a_distilbert_run_exports_reads_back_and_fine_tunes(shards_dir, tmp_path, capsys) -> None:
    run, hf_dir = tmp_path / "run", tmp_path / "hf"
    args = ["train", "--data", str(shards_dir), "--output", str(run), "--config", _config(tmp_path)]
    assert main([*args, "--max-steps", "3", "--batch-size", "8", "--no-progress"]) == 0
    assert main(["export", "--run", str(run), "--output", str(hf_dir)]) == 0
    config = json.loads((hf_dir / "config.json").read_text())
    assert config["model_type"] == "distilbert" and config["architectures"] == [
        "DistilBertForMaskedLM"
    ]
    assert config["dim"] == 32 and config["n_layers"] == 2
    hf = transformers.AutoModelForMaskedLM.from_pretrained(hf_dir).eval()
    train_config, model, _ = load_run(run)
    ids = torch.randint(5, train_config.model.vocab_size, (2, 12))
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    with torch.no_grad():
        ours = model.mlm(model.encoder(ids, mask, None))
        theirs = hf(input_ids=ids, attention_mask=mask).logits
    real = mask.bool()
    assert torch.allclose(ours[real], theirs[real], atol=1e-4, rtol=0)

    # --init-from reads the export back: every tensor has its place.
    again = tmp_path / "again"
    args = ["train", "--data", str(shards_dir), "--output", str(again), "--preset", "bert-tiny"]
    args += ["--init-from", str(hf_dir), "--max-steps", "2", "--batch-size", "8", "--warmup", "1"]
    assert main([*args, "--no-progress"]) == 0
    report = json.loads((again / "init.json").read_text())
    assert report["missing"] == [] and report["unexpected"] == [], report
    assert json.loads((again / "config.json").read_text())["model"]["family"] == "distilbert"

    # Fine-tuning from the export: DistilBERT's sequence head.
    from tests.trainer.finetune.test_finetune_cli import write_sst2

    write_sst2(tmp_path / "sst2", seed=0, rows=32)
    tuned = tmp_path / "tuned"
    args = [
        "finetune",
        "--run",
        str(hf_dir),
        "--task",
        "glue/sst2",
        "--data",
        str(tmp_path / "sst2"),
    ]
    assert main([*args, "--output", str(tuned), "--epochs", "1", "--no-progress"]) == 0
    assert main(["export", "--run", str(tuned), "--output", str(tmp_path / "hf-sst2")]) == 0
    exported = json.loads((tmp_path / "hf-sst2" / "config.json").read_text())
    assert exported["architectures"] == ["DistilBertForSequenceClassification"]


def test_distilbert_has_no_sentence_objective(nsp_shards, tmp_path, capsys) -> None:
    args = ["train", "--data", str(nsp_shards), "--output", str(tmp_path / "run")]
    args += ["--config", _config(tmp_path), "--objective", "mlm,nsp", "--no-progress"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "distilbert has no sentence objective" in err, err
