"""BART: our loss and logits against transformers' BartForConditionalGeneration on the same
weights and a noised batch, the loader's noise from real doc-sentences shards, and a run
that trains, resumes exactly and exports (generate() runs on the export)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from clozeworks.cli import main
from clozeworks.corpus.shards.masking import IGNORE_INDEX, MaskTables
from clozeworks.schemas.errors import UsageError
from clozeworks.trainer.batch_index import prepare
from clozeworks.trainer.config import RUN_RECORD_KEYS, TrainConfig
from clozeworks.trainer.data.denoising import DECODER_INPUTS, Denoising
from clozeworks.trainer.data.loader import ShardDataset
from clozeworks.trainer.families import build_model, to_transformers
from clozeworks.trainer.presets import preset
from tests.trainer.test_generative import SPECIAL, TINY, jitter, packed

transformers = pytest.importorskip("transformers")
MASK = 4


def tiny(**extra: object) -> TrainConfig:
    config = preset("bart-base")
    model = replace(config.model, **TINY, num_heads=4, decoder_layers=3, **extra)  # type: ignore[arg-type]
    return replace(config, model=model)


def noised(rows: int = 3, width: int = 48) -> dict[str, torch.Tensor]:
    batch = packed(rows, width)
    batch["input_ids"][:, 10] = 7  # a full stop: two sentences a row
    tables = MaskTables.build(1000, [0, 1, 2, 3, MASK], None, MASK)
    Denoising(tables, 7, SPECIAL["pad"], SPECIAL["sep"])(batch, torch.arange(rows))
    return batch


def test_bart_loss_and_logits_are_transformers() -> None:
    config = tiny(dropout=0.0, attention_dropout=0.0)
    model = jitter(build_model(config))
    ((_, hf),) = to_transformers(model, config, SPECIAL)
    assert isinstance(hf, transformers.BartForConditionalGeneration)
    assert hf.lm_head.weight.data_ptr() == hf.model.shared.weight.data_ptr()  # tied
    batch = noised()
    assert (batch["input_ids"] == MASK).any()
    with torch.no_grad():
        out = model(prepare(batch, unpad=False))
        theirs = hf(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            labels=batch["labels"],
        )
        logits = model.logits(model.hidden(batch))
    # transformers shifts the labels behind decoder_start_token_id itself: the same inputs.
    shifted = transformers.models.bart.modeling_bart.shift_tokens_right(
        batch["labels"], SPECIAL["pad"], SPECIAL["sep"]
    )
    assert torch.equal(shifted, batch[DECODER_INPUTS])
    assert torch.allclose(out["bart_loss"], theirs.loss, atol=1e-5)
    predicted = batch["labels"] != IGNORE_INDEX
    assert (logits[predicted] - theirs.logits[predicted]).abs().max() < 1e-4
    assert int(out["bart_count"]) == int(predicted.sum())


def test_bart_presets_are_the_papers() -> None:
    base, large = preset("bart-base"), preset("bart-large")
    assert base.objectives == ("bart",)
    sizes = [
        (c.num_layers, c.decoder_depth, c.hidden_size, c.num_heads, c.intermediate_size)
        for c in (base.model, large.model)
    ]
    assert sizes == [(6, 6, 768, 12, 3072), (12, 12, 1024, 16, 4096)]
    ours = build_model(replace(base, model=replace(base.model, vocab_size=50265)))
    n = sum(p.numel() for p in ours.parameters())
    theirs = transformers.BartForConditionalGeneration(transformers.BartConfig.from_dict({
        "vocab_size": 50265, "d_model": 768, "encoder_layers": 6, "decoder_layers": 6,
        "encoder_attention_heads": 12, "decoder_attention_heads": 12,
        "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072,
    }))  # fmt: skip
    m = sum(p.numel() for p in theirs.parameters())
    assert 0 <= n - m < 64 * 768  # bart-base's 139M, up to the padded vocabulary rows


def test_loader_noise_is_the_same_with_workers(doc_shards: Path) -> None:
    ds = ShardDataset(doc_shards, batch_size=8, seed=3, objectives=("bart",))
    alone = [b for _, b in zip(range(3), ds.loader(num_workers=0), strict=False)]
    workers = [b for _, b in zip(range(3), ds.loader(num_workers=2), strict=False)]
    for a, b in zip(alone, workers, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), key
    first = alone[0]
    stats = first["denoise_stats"].sum(0)
    assert stats[1] < stats[0] and stats[2] > 0  # shorter, with masks


def test_a_new_draw_each_epoch(doc_shards: Path) -> None:
    """Each sequence (found by its original row, the labels) is noised anew in epoch 2."""
    loader = ShardDataset(doc_shards, batch_size=32, seed=3, objectives=("bart",)).loader()
    epochs = []
    for _ in range(2):
        noise = {}
        for batch in loader:
            for labels, inputs, real in zip(
                batch["labels"], batch["input_ids"], batch["attention_mask"].bool(), strict=True
            ):
                noise[tuple(labels[labels != IGNORE_INDEX].tolist())] = inputs[real].tolist()
        epochs.append(noise)
    assert epochs[0].keys() == epochs[1].keys() and len(epochs[0]) > 50
    same = sum(epochs[0][k] == epochs[1][k] for k in epochs[0])
    assert same < 0.05 * len(epochs[0])


def test_bart_reads_doc_sentences_only(shards_dir: Path) -> None:
    with pytest.raises(
        UsageError, match="bart reads running text: shards built with --mode doc-sentences"
    ):
        ShardDataset(shards_dir, batch_size=8, objectives=("bart",))


def run_args(shards: Path, run: Path, steps: int, *extra: str) -> list[str]:
    sizes = [f"model.{k}={v}" for k, v in TINY.items() if k != "vocab_size"]
    return [
        "train", "--data", str(shards), "--output", str(run), "--preset", "bart-base",
        "--max-steps", str(steps), "--batch-size", "8", "--save-every", "3",
        "--log-every", "1", "--warmup", "0.2", "--no-progress", "--set", "optim.decay_steps=6",
        "--deterministic", "--set", "model.num_heads=4", "--set", "model.decoder_layers=2",
        *[x for s in sizes for x in ("--set", s)], *extra,
    ]  # fmt: skip


def test_train_resume_and_export(doc_shards: Path, tmp_path: Path) -> None:
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main(run_args(doc_shards, whole, 6)) == 0
    assert main(run_args(doc_shards, part, 3)) == 0
    assert main([*run_args(doc_shards, part, 6), "--resume"]) == 0
    a = load_file(whole / "step-0000006" / "model.safetensors")
    b = load_file(part / "step-0000006" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    records = [json.loads(line) for line in (whole / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["bart_loss"] < records[0]["bart_loss"]
    assert all(0.5 < r["bart_length_ratio"] < 1.0 for r in records)

    out = tmp_path / "hf"
    assert main(["export", "--run", str(whole), "--output", str(out)]) == 0
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    assert isinstance(hf, transformers.BartForConditionalGeneration)
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    config = TrainConfig.from_dict(
        {k: v for k, v in json.loads((whole / "config.json").read_text()).items()
         if k not in RUN_RECORD_KEYS}
    )  # fmt: skip
    model = build_model(config)
    model.load_state_dict(load_file(whole / "step-0000006" / "model.safetensors"), strict=False)
    model.eval()
    batch = next(
        iter(ShardDataset(doc_shards, batch_size=4, seed=9, objectives=("bart",)).loader())
    )
    with torch.no_grad():
        theirs = hf(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            labels=batch["labels"],
        ).loss
        ours = model(prepare(batch, unpad=False))
        generated = hf.generate(
            **tokenizer("a [MASK] of the module.", return_tensors="pt"), max_new_tokens=8
        )
    assert torch.allclose(ours["bart_loss"], theirs, atol=1e-4)
    assert generated.shape[0] == 1 and 2 <= generated.shape[1] <= 9
    assert generated[0, 0] == tokenizer.sep_token_id  # the decoder starts from </s>


@pytest.fixture(scope="module")
def bart_run(doc_shards: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("bart") / "run"
    assert main(run_args(doc_shards, run, 6)) == 0
    return run


def test_bart_classifier_is_transformers() -> None:
    """BART's own head on the decoder's last </s>, rows of one and of two </s> with padding:
    the logits of BartForSequenceClassification with the same weights."""
    from clozeworks.trainer.models.bart import sequence_model, sequence_to_transformers

    config = tiny(dropout=0.0, attention_dropout=0.0)
    model = sequence_model(config.model, jitter(build_model(config)), 3, SPECIAL)
    jitter(model)
    hf = sequence_to_transformers(transformers, model, {"num_labels": 3})
    assert isinstance(hf, transformers.BartForSequenceClassification)
    for pairs in (False, True):
        batch = packed(4, 40)
        if pairs:  # [CLS] A [SEP] B [SEP]: the last </s> is read
            batch["input_ids"][:, 9] = SPECIAL["sep"]
        with torch.no_grad():
            ours = model(batch["input_ids"], batch["attention_mask"])
            theirs = hf(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        assert (ours - theirs.logits).abs().max() < 1e-5


def test_finetune_classification_and_export(bart_run: Path, tmp_path: Path) -> None:
    from clozeworks.trainer.finetune.store import load
    from tests.trainer.finetune.test_export_matrix import _write_pairs
    from tests.trainer.finetune.test_finetune_cli import write_sst2

    flags = ["--epochs", "1", "--batch-size", "16", "--lr", "1e-3", "--no-progress"]
    for task, write in (("glue/sst2", write_sst2), ("glue/stsb", _write_pairs)):
        data = tmp_path / task.replace("/", "-")
        if task == "glue/sst2":
            write(data, seed=7, rows=48)
        else:
            write(data, seed=8, rows=48, regression=True)
        tuned, exported = tmp_path / f"tuned-{data.name}", tmp_path / f"hf-{data.name}"
        args = ["finetune", "--run", str(bart_run), "--task", task, "--data", str(data)]
        assert main([*args, "--output", str(tuned), *flags]) == 0
        assert main(["export", "--run", str(tuned), "--output", str(exported)]) == 0
        hf = transformers.AutoModelForSequenceClassification.from_pretrained(exported).eval()
        assert isinstance(hf, transformers.BartForSequenceClassification)
        tokenizer = transformers.AutoTokenizer.from_pretrained(exported)
        if task == "glue/sst2":
            enc = tokenizer(
                ["a good film", "bad , long and dull ."], padding=True, return_tensors="pt"
            )
        else:
            enc = tokenizer(["a b c", "d e"], ["a b", "f g h i"], padding=True, return_tensors="pt")
        model = load(tuned).model
        with torch.no_grad():
            ours = model(enc["input_ids"], enc["attention_mask"])
            theirs = hf(**enc).logits
        assert ours.shape == theirs.shape == (2, 1 if task == "glue/stsb" else 2)
        assert (ours - theirs).abs().max() < 1e-4


def test_bart_fine_tunes_sequence_tasks_only(
    bart_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.trainer.finetune.test_finetune_cli import write_conll

    write_conll(tmp_path / "conll", seed=7, sentences=8)
    args = ["finetune", "--run", str(bart_run), "--task", "conll2003"]
    assert main([*args, "--data", str(tmp_path / "conll"), "--output", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert "a bart model fine-tunes single, pair, regression tasks" in err
    assert "not a tokens task" in err and len(err.strip().splitlines()) == 1
