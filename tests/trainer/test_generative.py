"""GPT and T5: our loss and logits against transformers' on the same weights and batches,
the loader's targets from real shards, and runs that train, resume exactly and export."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from clozeworks.cli import main
from clozeworks.corpus.shards.masking import IGNORE_INDEX
from clozeworks.trainer.batch_index import prepare
from clozeworks.trainer.config import RUN_RECORD_KEYS, ModelConfig, TrainConfig
from clozeworks.trainer.data.loader import ShardDataset
from clozeworks.trainer.data.targets import CausalTargets, SpanCorruption
from clozeworks.trainer.families import build_model, to_transformers
from clozeworks.trainer.models.xlnet import permutation_masks
from clozeworks.trainer.presets import preset
from clozeworks.trainer.runinfo import run_summary

transformers = pytest.importorskip("transformers")

TINY = {"num_layers": 2, "hidden_size": 64, "intermediate_size": 96, "vocab_size": 1000}
SPECIAL = {"pad": 0, "cls": 2, "sep": 3}


def tiny(name: str, **extra: object) -> TrainConfig:
    config = preset(name)
    model = replace(config.model, **TINY, num_heads=4, **extra)  # type: ignore[arg-type]
    return replace(config, model=model)


def jitter(model: torch.nn.Module) -> torch.nn.Module:
    """Every weight moved off its initial value (norm weights are ones at first)."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    return model.eval()


def packed(rows: int = 3, width: int = 48) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 900, (rows, width), generator=g)
    ids[:, 0] = SPECIAL["cls"]
    mask = torch.ones_like(ids)
    mask[1, 30:], ids[1, 30:], ids[1, 29] = 0, SPECIAL["pad"], SPECIAL["sep"]
    ids[:, -1] = torch.where(mask[:, -1].bool(), SPECIAL["sep"], ids[:, -1])
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


def test_gpt_loss_and_logits_are_gpt2s() -> None:
    config = tiny("gpt2-small", dropout=0.0, attention_dropout=0.0)
    model = jitter(build_model(config))
    ((_, hf),) = to_transformers(model, config, SPECIAL)
    assert isinstance(hf, transformers.GPT2LMHeadModel)
    batch = packed()
    CausalTargets()(batch)
    with torch.no_grad():
        out = model(prepare(batch, unpad=False))
        real = batch["attention_mask"].bool()
        labels = batch["input_ids"].masked_fill(~real, IGNORE_INDEX)  # HF shifts them itself
        theirs = hf(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels
        )
        logits = model.logits(model.hidden(batch["input_ids"]))
    assert torch.allclose(out["clm_loss"], theirs.loss, atol=1e-5)
    assert (logits[real] - theirs.logits[real]).abs().max() < 1e-4
    assert int(out["clm_count"]) == int(real.sum()) - 3  # no next token after a row's last


def test_t5_loss_and_logits_are_t5s_v1_1() -> None:
    config = tiny("t5-small", head_size=16, dropout=0.0, attention_dropout=0.0)
    model = jitter(build_model(config))
    ((_, hf),) = to_transformers(model, config, SPECIAL)
    assert isinstance(hf, transformers.T5ForConditionalGeneration)
    assert hf.lm_head.weight.data_ptr() != hf.shared.weight.data_ptr()  # v1.1: untied
    batch = packed()
    SpanCorruption(torch.arange(999, 899, -1), SPECIAL["sep"], SPECIAL["pad"])(
        batch, torch.arange(3)
    )
    with torch.no_grad():
        out = model(prepare(batch, unpad=False))
        theirs = hf(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            labels=batch["labels"],
        )
        logits = model.logits(model.hidden(batch))
    assert torch.allclose(out["t5_loss"], theirs.loss, atol=1e-5)
    predicted = batch["labels"] != IGNORE_INDEX
    assert (logits[predicted] - theirs.logits[predicted]).abs().max() < 1e-4


def test_xlnet_loss_and_logits_are_xlnets_with_two_segments() -> None:
    config = tiny("xlnet-base", dropout=0.0, attention_dropout=0.0)
    model = jitter(build_model(config))
    ((_, hf),) = to_transformers(model, config, SPECIAL)
    assert isinstance(hf, transformers.XLNetLMHeadModel)
    g = torch.Generator().manual_seed(2)
    batch = packed(rows=3, width=32)
    batch["token_type_ids"][:, 12:] = 1
    target = (torch.rand(3, 32, generator=g) < 0.2) & batch["attention_mask"].bool()
    target[:, 0] = False
    order = torch.stack([torch.randperm(32, generator=g) for _ in range(3)])
    special = (batch["input_ids"] == SPECIAL["cls"]) | (batch["input_ids"] == SPECIAL["sep"])
    batch["perm_order"] = torch.where(target | special, order, -1)
    width = int(target.sum(1).max())
    positions = torch.full((3, width), -1)
    for b in range(3):
        where = target[b].nonzero().squeeze(1)
        positions[b, : len(where)] = where
    batch["plm_positions"] = positions
    batch["labels"] = torch.where(
        positions >= 0, batch["input_ids"].gather(1, positions.clamp(min=0)), IGNORE_INDEX
    )
    with torch.no_grad():
        out = model(prepare(batch, unpad=False))
        theirs = hf_loss(hf, batch, "plm")
    assert torch.allclose(out["plm_loss"], theirs, atol=1e-5)
    # The order matters: with every pair visible, transformers' loss is another one.
    visible = dict(batch, perm_order=torch.full_like(order, -1))
    with torch.no_grad():
        assert not torch.allclose(hf_loss(hf, visible, "plm"), theirs, atol=1e-4)


def test_permutation_targets_predict_a_sixth_in_a_random_order(t5_shards: Path) -> None:
    """Over 800 rows of the session's shards: 1/6 of the predictable tokens are targets
    (within 0.01: each row rounds its own budget); targets and special tokens take their
    places in a uniformly random order, so a target precedes another target of its row in
    half of the pairs (4 standard errors of the pooled share); context is order -1, a
    target never sees itself or a later target, and context never sees a target."""
    ds = ShardDataset(
        t5_shards, 100, seed=5, objectives=("plm",), masking=preset("xlnet-base").masking
    )
    before = pairs = 0
    predicted = predictable = 0
    for _, batch in zip(range(8), ds.loader(), strict=False):
        predicted += int(batch["plm_stats"][:, 0].sum())
        predictable += int(batch["plm_stats"][:, 1].sum())
        perm, _, target = permutation_masks(batch)
        order = batch["perm_order"]
        context = (order == -1) & batch["attention_mask"].bool()
        assert not (context & target).any()
        eye = torch.eye(order.shape[1], dtype=torch.bool)
        assert perm[target[:, :, None] & eye].all()  # a target does not see itself
        assert not perm[target[:, :, None] & context[:, None, :]].any()  # but sees context
        blocked = perm & context[:, :, None] & target[:, None, :]
        assert torch.equal(blocked, context[:, :, None] & target[:, None, :])  # context: blind
        for b in range(order.shape[0]):
            ranks = order[b][target[b]]
            n = len(ranks)
            first = ranks[0] if n else None
            if n >= 2:
                before += int((ranks[1:] > first).sum())
                pairs += n - 1
    assert abs(predicted / predictable - 1 / 6) < 0.01
    share, se = before / pairs, 0.5 / math.sqrt(pairs)
    assert abs(share - 0.5) < 4 * se, (share, pairs)


def test_relative_buckets_match_transformers() -> None:
    from transformers.models.t5.modeling_t5 import T5Attention

    from clozeworks.trainer.models.t5 import relative_buckets

    relative = torch.arange(-300, 300)[None, :] - torch.arange(0, 40)[:, None]
    for bidirectional in (True, False):
        ours = relative_buckets(relative, bidirectional, 32, 128)
        theirs = T5Attention._relative_position_bucket(relative, bidirectional, 32, 128)
        assert torch.equal(ours, theirs)


def test_t5_presets_are_v1_1_sizes() -> None:
    small, base = preset("t5-small").model, preset("t5-base").model
    assert (small.num_layers, small.hidden_size, small.num_heads, small.head_width) == (
        8,
        512,
        6,
        64,
    )
    assert small.intermediate_size == 1024 and base.intermediate_size == 2048
    assert (base.num_layers, base.hidden_size, base.num_heads) == (12, 768, 12)
    assert preset("t5-small").objectives == ("t5",)
    gpt = preset("gpt2-small")
    assert gpt.objectives == ("clm",) and gpt.model.max_position == 1024 and gpt.model.pre_ln
    n = sum(
        p.numel()
        for p in build_model(replace(gpt, model=replace(gpt.model, vocab_size=50257))).parameters()
    )
    assert abs(n - 124_439_808) < 64 * 768  # GPT-2 small's 124M, up to the padded vocab rows


@pytest.mark.parametrize("objective", ["clm", "t5", "plm"])
def test_loader_makes_the_targets_the_same_with_workers(t5_shards: Path, objective: str) -> None:
    ds = ShardDataset(t5_shards, batch_size=8, seed=3, objectives=(objective,))
    alone = [b for _, b in zip(range(4), ds.loader(num_workers=0), strict=False)]
    workers = [b for _, b in zip(range(4), ds.loader(num_workers=2), strict=False)]
    for a, b in zip(alone, workers, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), key
    first = alone[0]
    if objective == "t5":
        assert first["labels"].shape[1] < first["input_ids"].shape[1]
        sentinel = first["labels"][:, 0]
        assert (sentinel == ds.masker.sentinels[0]).all()  # type: ignore[union-attr]
    elif objective == "plm":
        at = first["plm_positions"].clamp(min=0)
        valid = first["plm_positions"] >= 0
        assert torch.equal(first["labels"][valid], first["input_ids"].gather(1, at)[valid])
    else:
        assert torch.equal(
            first["labels"][:, :-1][first["attention_mask"][:, 1:].bool()],
            first["input_ids"][:, 1:][first["attention_mask"][:, 1:].bool()],
        )


def test_t5_without_sentinels_is_a_clear_error(shards_dir: Path) -> None:
    from clozeworks.schemas.errors import BadInputError, UsageError

    with pytest.raises(UsageError, match="--sentinels"):
        ShardDataset(shards_dir, batch_size=8, objectives=("t5",))
    for objective in ("clm", "t5", "plm"):  # another tokenizer than the shards' is refused
        with pytest.raises(BadInputError, match="different tokenizer"):
            ShardDataset(shards_dir, 8, objectives=(objective,), tokenizer_sha256="0" * 64)


def run_args(shards: Path, run: Path, name: str, steps: int, *extra: str) -> list[str]:
    sizes = [f"model.{k}={v}" for k, v in TINY.items() if k != "vocab_size"]
    if name.startswith("t5"):
        sizes.append("model.head_size=16")
    return [
        "train", "--data", str(shards), "--output", str(run), "--preset", name,
        "--max-steps", str(steps), "--batch-size", "8", "--save-every", "3",
        "--log-every", "1", "--warmup", "0.2", "--no-progress", "--set", "optim.decay_steps=6",
        "--deterministic",
        *[x for s in sizes for x in ("--set", s)], "--set", "model.num_heads=4", *extra,
    ]  # fmt: skip


OWN = {"gpt2-small": "clm", "t5-small": "t5", "xlnet-base": "plm"}


def hf_loss(hf: torch.nn.Module, batch: dict[str, torch.Tensor], objective: str) -> torch.Tensor:
    """transformers' loss on a loader batch, with its own names for our fields."""
    ids, mask = batch["input_ids"], batch["attention_mask"]
    if objective == "clm":  # transformers shifts the labels itself
        return hf(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss
    if objective == "t5":
        return hf(input_ids=ids, attention_mask=mask, labels=batch["labels"]).loss
    perm, mapping, _ = permutation_masks(batch)
    return hf(
        input_ids=ids,
        attention_mask=mask,
        token_type_ids=batch["token_type_ids"],
        perm_mask=perm.float(),
        target_mapping=mapping.float(),
        labels=batch["labels"],
    ).loss


@pytest.mark.parametrize(
    ("name", "auto"),
    [
        ("gpt2-small", "AutoModelForCausalLM"),
        ("t5-small", "AutoModelForSeq2SeqLM"),
        ("xlnet-base", "XLNetLMHeadModel"),
    ],
)
def test_train_resume_and_export(
    t5_shards: Path, tmp_path: Path, name: str, auto: str, capsys: pytest.CaptureFixture[str]
) -> None:
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main(run_args(t5_shards, whole, name, 6)) == 0
    assert main(run_args(t5_shards, part, name, 3)) == 0
    assert main([*run_args(t5_shards, part, name, 6), "--resume"]) == 0
    a = load_file(whole / "step-0000006" / "model.safetensors")
    b = load_file(part / "step-0000006" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    objective = OWN[name]
    records = [json.loads(line) for line in (whole / "metrics.jsonl").read_text().splitlines()]
    assert records[-1][f"{objective}_loss"] < records[0][f"{objective}_loss"]
    if objective == "t5":
        assert abs(sum(r["t5_noise_density"] for r in records) / len(records) - 0.15) < 0.01
    if objective == "plm":  # 1/K of 62-token rows, rounded per row: within 0.01 of 1/6
        share = sum(r["plm_predicted_share"] for r in records) / len(records)
        assert abs(share - 1 / 6) < 0.01
    stats = run_summary(whole)["objective_stats"]
    expected = {"clm": set(), "t5": {"t5_noise_density", "t5_mean_span"}}
    assert set(stats) == expected.get(objective, {"plm_predicted_share"})
    capsys.readouterr()
    assert main(["inspect", str(whole)]) == 0
    shown = capsys.readouterr().out
    assert f"{objective}_loss" in shown and all(f"{name} " in shown for name in stats)

    out = tmp_path / "hf"
    assert main(["export", "--run", str(whole), "--output", str(out)]) == 0
    hf = getattr(transformers, auto).from_pretrained(out).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    config = TrainConfig.from_dict(
        {k: v for k, v in json.loads((whole / "config.json").read_text()).items()
         if k not in RUN_RECORD_KEYS}
    )  # fmt: skip
    model = build_model(config)
    model.load_state_dict(load_file(whole / "step-0000006" / "model.safetensors"), strict=False)
    model.eval()
    ds = ShardDataset(t5_shards, batch_size=4, seed=9, objectives=(objective,))
    if objective == "plm":
        ds = ShardDataset(
            t5_shards, 4, seed=9, objectives=(objective,), masking=preset(name).masking
        )
    batch = next(iter(ds.loader()))
    with torch.no_grad():
        theirs = hf_loss(hf, batch, objective)
        ours = model(prepare(batch, unpad=False))
    assert torch.allclose(ours[f"{objective}_loss"], theirs, atol=1e-4)
    assert tokenizer.convert_tokens_to_ids("<extra_id_0>") == len(tokenizer) - 1


def test_wrong_shards_or_objectives_are_one_line_errors(
    nsp_shards: Path, t5_shards: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(run_args(nsp_shards, tmp_path / "a", "gpt2-small", 2)) == 2
    assert "clm reads running text" in capsys.readouterr().err
    assert main([*run_args(t5_shards, tmp_path / "b", "gpt2-small", 2), "--objective", "mlm"]) == 2
    assert "gpt trains clm" in capsys.readouterr().err
    assert main(run_args(t5_shards, tmp_path / "c", "gpt2-small", 2)) == 0
    data = tmp_path / "sst2"
    data.mkdir()
    for split in ("train", "dev"):
        (data / f"{split}.tsv").write_text("sentence\tlabel\ngood film\t1\nbad film\t0\n")
    capsys.readouterr()
    finetune = ["finetune", "--run", str(tmp_path / "c"), "--task", "glue/sst2"]
    assert main([*finetune, "--data", str(data), "--output", str(tmp_path / "f")]) == 2
    assert "no BERT-style encoder" in capsys.readouterr().err


def test_model_config_counts_heads_of_their_own_width() -> None:
    config = ModelConfig(family="t5", hidden_size=512, num_heads=6, head_size=64)
    assert config.head_width == 64 and config.decoder_depth == config.num_layers
    from clozeworks.schemas.errors import UsageError

    with pytest.raises(UsageError, match="hidden_size 512 is not a multiple of num_heads 6"):
        ModelConfig(hidden_size=512, num_heads=6)
