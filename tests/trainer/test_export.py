"""Exports load in transformers with no missing or unexpected weights, and give our logits."""

import json
import os
import stat
from pathlib import Path

import pytest
import torch
import transformers

from clozeworks.cli import main
from clozeworks.trainer.config import ModelConfig, TrainConfig
from clozeworks.trainer.export import load_run
from clozeworks.trainer.families import build_model, to_transformers

V = 1000
TINY = dict(vocab_size=V, hidden_size=32, num_layers=3, num_heads=2, intermediate_size=64)


def jitter(model: torch.nn.Module) -> torch.nn.Module:
    """Move every weight off its initial value, so a bias or LayerNorm mapped to the wrong
    place cannot hide behind zeros and ones."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.05)
    return model.eval()


def inputs(types: bool, pad_id: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(5, V, (3, 24), generator=g)
    attention = torch.ones_like(ids)
    attention[1, 15:] = 0
    ids[attention == 0] = pad_id
    batch = {"input_ids": ids, "attention_mask": attention}
    if types:
        batch["token_type_ids"] = (torch.arange(24) >= 10).long().expand(3, 24) * attention
    return batch


def ours(model, config: ModelConfig, batch) -> dict[str, torch.Tensor]:
    """Our logits at every position (the heads applied to all rows)."""
    args = (batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
    with torch.no_grad():
        if config.family == "electra":
            g = model.generator(*args)
            d = model.discriminator(*args)
            return {"generator": model.mlm(g), "logits": model.rtd(d)}
        h = model.encoder(*args)
        out = {"mlm": model.mlm(h)}
        if model.sentence is not None:
            out["sentence"] = model.sentence(h)
        return out


def theirs(hf, batch) -> torch.Tensor:
    with torch.no_grad():
        return hf(**batch)


def roundtrip(hf, tmp_path, name: str):
    hf.save_pretrained(tmp_path / name)
    loaded, info = type(hf).from_pretrained(tmp_path / name, output_loading_info=True)
    missing = [k for k in info["missing_keys"] if not k.endswith("position_ids")]
    assert not missing and not info["unexpected_keys"] and not info["mismatched_keys"], info
    return loaded.eval()


CASES = [
    ("bert", {}, ("mlm", "nsp"), "BertForPreTraining"),
    ("bert", {}, ("mlm",), "BertForMaskedLM"),
    ("bert", {"pre_ln": True}, ("mlm",), "RobertaPreLayerNormForMaskedLM"),
    ("roberta", {"type_vocab_size": 0, "pad_token_id": 1}, ("mlm",), "RobertaForMaskedLM"),
    ("albert", {"embedding_size": 16, "share": "all"}, ("mlm", "sop"), "AlbertForPreTraining"),
    (
        "albert",
        {"embedding_size": 16, "share": "attention"},
        ("mlm", "sso"),
        "AlbertForPreTraining",
    ),
    ("albert", {"embedding_size": 16, "share": "ffn"}, ("mlm",), "AlbertForMaskedLM"),
    ("electra", {"embedding_size": 16, "generator_fraction": 0.5}, ("mlm", "rtd"), "Electra"),
    ("distilbert", {"type_vocab_size": 0}, ("mlm",), "DistilBertForMaskedLM"),
]


@pytest.mark.parametrize(("family", "extra", "objectives", "expected"), CASES)
def test_export_loads_and_gives_our_logits(family, extra, objectives, expected, tmp_path) -> None:
    config = TrainConfig(
        model=ModelConfig(family=family, **{**TINY, **extra}), objectives=objectives
    )
    model = jitter(build_model(config))
    exported = to_transformers(model, config)
    batch = inputs(types=config.model.type_vocab_size > 0, pad_id=config.model.pad_token_id)
    real = batch["attention_mask"].bool()
    mine = ours(model, config.model, batch)
    for sub, hf in exported:
        assert type(hf).__name__.startswith(expected)
        hf = roundtrip(hf, tmp_path, sub or "main")
        out = theirs(hf, batch)
        if family == "electra" and sub == "generator":
            pairs = [(mine["generator"], out.logits[real])]
        elif family == "electra":
            pairs = [(mine["logits"][real], out.logits[real])]
        elif expected.endswith("PreTraining"):
            pairs = [(mine["mlm"], out.prediction_logits[real])]
            logits = out.seq_relationship_logits if family == "bert" else out.sop_logits
            pairs.append((mine["sentence"], logits))
        else:
            pairs = [(mine["mlm"], out.logits[real])]
        for a, b in pairs:
            a = a.reshape(-1, a.shape[-1]) if a.ndim > 2 else a
            a = a[real.flatten()] if a.shape[0] == real.numel() else a
            assert a.shape == b.shape
            assert torch.allclose(a, b, atol=1e-4, rtol=0), (a - b).abs().max()


def test_cloze_export_writes_a_loadable_directory_with_the_tokenizer(
    nsp_shards, tmp_path, capsys
) -> None:
    config = tmp_path / "small.toml"
    config.write_text(
        "[model]\nhidden_size = 32\nnum_layers = 2\nnum_heads = 2\nintermediate_size = 64\n"
        "[optim]\nwarmup_steps = 1\n",
        encoding="utf-8",
    )
    run, out = tmp_path / "run", tmp_path / "hf"
    common = ["--data", str(nsp_shards), "--output", str(run), "--config", str(config)]
    args = ["train", *common, "--objective", "mlm,nsp", "--max-steps", "2", "--batch-size", "4"]
    assert main([*args, "--no-progress", "--eval-split", "0.2"]) == 0
    mask = os.umask(0o022)
    try:
        assert main(["export", "--run", str(run), "--output", str(out)]) == 0
    finally:
        os.umask(mask)
    assert stat.S_IMODE((out / "model.safetensors").stat().st_mode) == 0o644  # not 0600
    # The model card says what was trained on what, for how long, and how it scored.
    card = (out / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: transformers\ntags: [clozeworks, bert, mlm, nsp]")
    assert "- Objectives: mlm, nsp" in card and "- Training: step 2 of 2, batch 4" in card
    assert f"- Data: `{nsp_shards}`" in card and "2 layers, hidden 32" in card
    # What the data is, from the shards' manifest as the run recorded it when it started.
    manifest = json.loads((Path(nsp_shards) / ".manifest.json").read_text())
    totals, stats = manifest["totals"], manifest["stats"]
    assert (
        f"  - {totals['sequences']:,} nsp sequences of up to {manifest['max_seq_len']} tokens "
        f"({totals['tokens']:,} tokens from {stats['shard.documents']:,} documents), "
        f"{manifest['vocab_kind']} vocabulary of {manifest['vocab_size']:,}\n"
    ) in card
    assert "- Held-out (step 2): " in card and "mlm_accuracy" in card
    hf, info = transformers.BertForPreTraining.from_pretrained(out, output_loading_info=True)
    assert not [k for k in info["missing_keys"] if "position_ids" not in k]
    assert not info["unexpected_keys"]
    tok = transformers.AutoTokenizer.from_pretrained(out)
    batch = tok(
        ["the quick brown fox", "returns the value of x"], padding=True, return_tensors="pt"
    )
    # A checkpoint's directory given as the run: the command to type instead.
    capsys.readouterr()
    assert main(["export", "--run", str(run / "step-0000002"), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"is a checkpoint of the run {run}: --run {run} --step 2" in err
    train_config, model, _ = load_run(run)
    assert json.loads((run / "config.json").read_text())["data"] == str(nsp_shards)
    mine = ours(model, train_config.model, dict(batch))
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        theirs_ = hf.eval()(**batch)
    assert torch.allclose(mine["mlm"][real], theirs_.prediction_logits[real], atol=1e-4)
    assert torch.allclose(mine["sentence"], theirs_.seq_relationship_logits, atol=1e-4)


def test_export_of_a_directory_that_is_not_a_run_is_a_usage_error(tmp_path, capsys) -> None:
    (tmp_path / "notes").mkdir()
    out = str(tmp_path / "x")
    assert main(["export", "--run", str(tmp_path / "notes"), "--output", out]) == 2
    assert "not a training run directory" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        ({"hidden_size": 1_000_000}, "past the 110,000,000,000 a run here can have"),
        ({"hidden_size": 64, "intermediate_size": 128}, "does not fit the weights"),
        ({"num_layers": 3}, None),  # a layer the weights lack: the load names the file
    ],
)
def test_an_edited_config_is_one_line_before_any_allocation(
    shards_dir, tmp_path, capsys, edit, says
) -> None:
    from clozeworks.trainer.loop import train
    from tests.trainer.test_loop import tiny_config

    run = tmp_path / "run"
    config = tiny_config(max_steps=1, save_every=1, optim={"warmup_steps": 0})
    train(config, shards_dir, run, progress=False)
    config = json.loads((run / "config.json").read_text())
    config["model"].update(edit)
    (run / "config.json").write_text(json.dumps(config))
    assert main(["export", "--run", str(run), "--output", str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert (says or "step-0000001") in err, err
    if says:
        assert f"{run / 'config.json'}: " in err, err


def test_a_model_past_the_ceiling_is_refused_before_training_allocates(shards_dir, tmp_path):
    from clozeworks.schemas.errors import BadInputError
    from clozeworks.trainer.loop import train
    from tests.trainer.test_loop import tiny_config

    config = tiny_config(model={"hidden_size": 1_000_000, "intermediate_size": 4_000_000})
    with pytest.raises(BadInputError, match="past the 110,000,000,000 a run here can have"):
        train(config, shards_dir, tmp_path / "run", progress=False)
