"""`--init-from`: weights from a transformers directory or a run, with a key report, the
tokenizer checked, and the architecture taken from the source."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace

import pytest
import torch

from clozeworks.cli import main
from clozeworks.trainer import init_from
from clozeworks.trainer.config import ModelConfig, TrainConfig
from clozeworks.trainer.families import build_model, to_transformers
from tests.trainer.test_export import CASES, TINY, inputs, jitter, ours


@pytest.mark.parametrize(("family", "extra", "objectives", "expected"), CASES)
def test_a_transformers_directory_loads_back_to_the_same_logits(
    family, extra, objectives, expected, tmp_path
) -> None:
    config = TrainConfig(
        model=ModelConfig(family=family, **{**TINY, **extra}), objectives=objectives
    )
    original = jitter(build_model(config))
    for sub, hf in to_transformers(original, config):
        hf.save_pretrained(tmp_path / sub)
    arch, _ = init_from.model_config(tmp_path, ModelConfig())
    fresh_config = replace(config, model=replace(arch, dropout=0.0), seed=7)
    fresh = build_model(fresh_config)
    report = init_from.load_weights(fresh, fresh_config, tmp_path)
    fresh.eval()
    assert report.unexpected == []
    if extra.get("share") in ("attention", "ffn") or family == "electra":
        # Sharing a part only, or a generator's head outside what transformers keeps.
        assert report.matched > 0
    else:
        assert report.missing == [], report.missing
    batch = inputs(types=arch.type_vocab_size > 0, pad_id=arch.pad_token_id)
    a, b = ours(original, config.model, batch), ours(fresh, arch, batch)
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-5), key


def test_a_base_model_without_heads_leaves_the_heads_new(tmp_path) -> None:
    config = TrainConfig(model=ModelConfig(**TINY), objectives=("mlm", "nsp"))
    (_, hf), *_ = to_transformers(jitter(build_model(config)), config)
    hf.bert.save_pretrained(tmp_path)  # BertModel: keys without the "bert." prefix
    fresh = build_model(replace(config, seed=3))
    report = init_from.load_weights(fresh, config, tmp_path)
    assert report.matched > 20
    assert {"mlm.dense.weight", "sentence.classifier.weight"} <= set(report.missing)
    assert "encoder.embeddings.word.weight" not in report.missing
    # bert.pooler is in BertModel; we keep it only with a sentence head, so it loads.
    assert "sentence.pooler.weight" not in report.missing


@pytest.fixture(scope="module")
def source_run(shards_dir, tmp_path_factory):
    """A tiny model pretrained for a while on the session's shards, and its export."""
    root = tmp_path_factory.mktemp("init")
    args = train_args(shards_dir, root / "run", "60")
    assert main([*args, "--lr", "3e-3"]) == 0
    assert main(["export", "--run", str(root / "run"), "--output", str(root / "hf")]) == 0
    return root


def train_args(data, out, steps: str) -> list[str]:
    return [
        "train",
        *("--data", str(data), "--output", str(out), "--max-steps", steps),
        *("--batch-size", "16", "--warmup", "0.1", "--log-every", "1", "--no-progress"),
        *("--set", "model.hidden_size=64", "--set", "model.num_layers=2"),
        *("--set", "model.num_heads=2", "--set", "model.intermediate_size=128"),
        *("--seed", "5"),
    ]


def first_losses(run) -> list[float]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["mlm_loss"] for line in lines[:3]]


@pytest.mark.parametrize("kind", ["hf", "run", "step"])
def test_cloze_train_init_from_starts_where_the_source_ended(
    kind, source_run, shards_dir, tmp_path, capsys
) -> None:
    source = {
        "hf": source_run / "hf",
        "run": source_run / "run",
        "step": source_run / "run" / "step-0000060",
    }[kind]
    # The preset's architecture (bert-tiny, H128) is replaced by the source's (H64).
    args = ["train", "--data", str(shards_dir), "--output", str(tmp_path / "run")]
    args += ["--max-steps", "3", "--batch-size", "16", "--warmup", "1", "--log-every", "1"]
    assert main([*args, "--init-from", str(source), "--no-progress", "--seed", "9"]) == 0
    err = capsys.readouterr().err
    assert f"init from {source}" in err
    report = json.loads((tmp_path / "run" / "init.json").read_text())
    assert report["missing"] == [] and report["unexpected"] == [] and report["matched"] > 20
    scratch = tmp_path / "scratch"
    assert main(train_args(shards_dir, scratch, "3")) == 0
    warm, cold = first_losses(tmp_path / "run"), first_losses(scratch)
    trained = json.loads((source_run / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    # Random init sits near ln(vocab) = 7.6; the source ended far below it, and this run
    # starts nearer where the source ended than where random weights start (a step's loss
    # on a batch of 16 varies by a few tenths around the source's logged window mean).
    midway = (trained["mlm_loss"] + min(cold)) / 2
    assert min(cold) > 7.0 and trained["mlm_loss"] < 6.5, (trained, cold)
    assert max(warm) < midway, (warm, cold, trained["mlm_loss"])
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["model"]["hidden_size"] == 64 and config["init_from"] == str(source)


def test_resume_keeps_the_run_s_weights_not_the_source_s(source_run, shards_dir, tmp_path):
    args = ["train", "--data", str(shards_dir), "--output", str(tmp_path / "run")]
    args += ["--batch-size", "16", "--warmup", "1", "--no-progress"]
    args += ["--init-from", str(source_run / "hf")]
    assert main([*args, "--max-steps", "2"]) == 0
    (tmp_path / "run" / "init.json").unlink()
    assert main([*args, "--max-steps", "4", "--resume"]) == 0
    assert not (tmp_path / "run" / "init.json").exists()  # weights came from step 2


def test_a_different_tokenizer_is_refused_with_both_fingerprints(
    source_run, shards_dir, tmp_path, capsys
) -> None:
    other = tmp_path / "other"
    shutil.copytree(source_run / "hf", other)
    tok = json.loads((other / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    a, b = list(vocab)[100:102]
    vocab[a], vocab[b] = vocab[b], vocab[a]  # two ids swapped: same size, other meaning
    (other / "tokenizer.json").write_text(json.dumps(tok))
    args = ["train", "--data", str(shards_dir), "--output", str(tmp_path / "run")]
    assert main([*args, "--init-from", str(other), "--max-steps", "2", "--warmup", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "is not the one the shards were encoded with" in err and "Traceback" not in err
    assert len(set(re.findall(r"\(([0-9a-f]{12})\)", err))) == 2, err  # both fingerprints


def test_not_a_model_directory_is_one_clear_error(shards_dir, tmp_path, capsys) -> None:
    args = ["train", "--data", str(shards_dir), "--output", str(tmp_path / "run")]
    assert main([*args, "--init-from", str(tmp_path), "--max-steps", "2", "--warmup", "1"]) == 2
    assert "neither a transformers directory nor a run" in capsys.readouterr().err
