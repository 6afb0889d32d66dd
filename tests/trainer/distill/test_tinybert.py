"""TinyBERT's general distillation: `att` and `hid` learn from the teacher layers the
uniform map gives each student layer, the states and scores they read are the ones
transformers computes, each loss is its definition on a fixed batch (padded or unpadded
alike), and the two stages (att,hid; then kd at temperature 1) run from the command line
and export."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from clozeworks.cli import main
from clozeworks.trainer.batch_index import PACKING, packing
from clozeworks.trainer.config import TrainConfig
from clozeworks.trainer.distill.parts import attach
from clozeworks.trainer.distill.teacher import load_teacher, with_teacher_width
from clozeworks.trainer.families import build_model
from clozeworks.trainer.models.bert import Kept
from tests.trainer.distill.conftest import write

STUDENT = (
    "[model]\nhidden_size = 16\nnum_layers = 2\nnum_heads = 2\nintermediate_size = 32\n"
    "[optim]\nwarmup_steps = 1\nlr = 1e-3\n"
)


def _batch(vocab: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (3, 16), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 12:] = 0
    mask[2, 9:] = 0
    ids[mask == 0] = 0
    labels = torch.full_like(ids, -100)
    labels[:, 3] = ids[:, 3]
    return {"input_ids": ids, "attention_mask": mask, "labels": labels,
            "token_type_ids": torch.zeros_like(ids)}  # fmt: skip


def _student(teacher_run, objectives: list[str]):
    teacher_config, teacher = load_teacher(teacher_run)
    config = TrainConfig.from_dict(
        {"model": {"hidden_size": 16, "num_layers": 2, "num_heads": 2, "intermediate_size": 32,
                   "vocab_size": teacher_config.model.vocab_size},
         "objectives": objectives, "teacher": str(teacher_run), "temperature": 1.0}
    )  # fmt: skip
    config = with_teacher_width(config, teacher_config.model)
    student = build_model(config).eval()
    attach(student, teacher, 1.0)
    return student, teacher


def test_kept_states_and_scores_are_what_transformers_computes(teacher_run, tmp_path) -> None:
    """The embeddings' and layers' outputs kept at the real tokens are transformers'
    hidden_states there, and the softmax of each layer's scores over a row's real keys is
    transformers' attention probabilities; the unpadded encoder keeps the same."""
    from transformers import BertModel

    _, teacher = load_teacher(teacher_run)
    assert main(["export", "--run", str(teacher_run), "--output", str(tmp_path / "hf")]) == 0
    hf = BertModel.from_pretrained(tmp_path / "hf", attn_implementation="eager").eval()
    batch = _batch(teacher.config.vocab_size)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    with torch.no_grad():
        ref = hf(ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
        padded, unpadded = Kept([1, 2, 3, 4]), Kept([1, 2, 3, 4])
        h = teacher.encoder(ids, mask, None, None, padded)
        h2 = teacher.encoder(ids, mask, None, packing(mask), unpadded)
    real = mask.bool()
    assert len(padded.states) == len(ref.hidden_states) == 5
    triples = zip(padded.states, unpadded.states, ref.hidden_states, strict=True)
    for ours, other, theirs in triples:
        torch.testing.assert_close(ours, theirs[real], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(other, ours, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(h2[real], h[real], atol=1e-6, rtol=1e-5)
    pairs = (real[:, None, :, None] & real[:, None, None, :]).expand(-1, 2, -1, -1)
    for flat, other, probs in zip(padded.scores, unpadded.scores, ref.attentions, strict=True):
        torch.testing.assert_close(other, flat, atol=1e-5, rtol=1e-5)
        full = torch.full(pairs.shape, -math.inf).masked_scatter(pairs, flat)
        ours = full.softmax(-1).nan_to_num(0.0)  # rows of padding: no real key
        rows = real[:, None, :, None].expand_as(pairs)
        torch.testing.assert_close(ours[rows], probs[rows], atol=1e-6, rtol=1e-5)


@torch.no_grad()
def test_att_and_hid_are_their_definitions_on_a_fixed_batch(teacher_run) -> None:
    """Each student layer m of 2 learns from teacher layer 2m of 4 (the embeddings from the
    embeddings); hid projects the student's 16-wide states to the teacher's 32; both
    losses average over the real tokens (pairs), whether the batch runs padded or not."""
    student, teacher = _student(teacher_run, ["att", "hid"])
    assert student.fit.weight.shape == (32, 16)
    assert student.loss_weights == {"mlm": 0.0, "att": 1.0, "hid": 1.0}
    batch = _batch(teacher.config.vocab_size)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    real = mask.bool()
    with torch.no_grad():
        out = student(batch)
        unpadded = student({**batch, PACKING: packing(mask)})
        s_kept, t_kept = Kept(), Kept()
        student.encoder(ids, mask, None, None, s_kept)
        teacher.encoder(ids, mask, torch.zeros_like(ids), None, t_kept)
        s_states, t_states = s_kept.states, t_kept.states

    def direct_scores(layer, x: torch.Tensor) -> torch.Tensor:
        full = torch.zeros(*real.shape, x.shape[-1]).masked_scatter(real[..., None], x)
        w_q, w_k, _ = layer.attention.qkv.weight.split(x.shape[-1])
        b_q, b_k, _ = layer.attention.qkv.bias.split(x.shape[-1])
        q = (full @ w_q.T + b_q).view(3, 16, 2, -1).transpose(1, 2)
        k = (full @ w_k.T + b_k).view(3, 16, 2, -1).transpose(1, 2)
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # [B, A, L, L]
        return s[(real[:, None, :, None] & real[:, None, None, :]).expand_as(s)]

    hid = sum(F.mse_loss(student.fit(s_states[m]), t_states[2 * m]) for m in range(3))
    att = sum(
        F.mse_loss(
            direct_scores(student.encoder.layers[m], s_states[m]),
            direct_scores(teacher.encoder.layers[2 * m + 1], t_states[2 * m + 1]),
        )
        for m in range(2)
    )
    assert out["hid_loss"].item() == pytest.approx(float(hid), rel=1e-5)
    assert out["att_loss"].item() == pytest.approx(float(att), rel=1e-5)
    assert unpadded["hid_loss"].item() == pytest.approx(float(hid), rel=1e-5)
    assert unpadded["att_loss"].item() == pytest.approx(float(att), rel=1e-5)


def _args(shards_dir, teacher_run, run, tmp_path, *extra: str) -> list[str]:
    args = ["train", "--data", str(shards_dir), "--output", str(run), "--teacher", str(teacher_run)]
    args += ["--config", write(tmp_path / "s.toml", STUDENT), "--batch-size", "8"]
    return [*args, "--log-every", "1", "--no-progress", *extra]


def test_the_two_stages_run_from_the_command_line_and_export(
    shards_dir, teacher_run, tmp_path, capsys
) -> None:
    """Stage 1 (att,hid) trains the student's layers and its projection, not its MLM head;
    stage 2 starts from stage 1 and learns the teacher's soft targets at temperature 1
    (TinyBERT's prediction-layer distillation). Each exports as BertForMaskedLM, without
    the projection."""
    from safetensors import safe_open

    first, second = tmp_path / "first", tmp_path / "second"
    args = _args(shards_dir, teacher_run, first, tmp_path, "--objective", "att,hid")
    assert main([*args, "--max-steps", "12", "--save-every", "12"]) == 0
    config = json.loads((first / "config.json").read_text())
    assert config["model"]["teacher_width"] == 32 and config["objectives"] == ["att", "hid"]
    lines = [json.loads(x) for x in (first / "metrics.jsonl").read_text().splitlines()]
    steps = [x for x in lines if "hid_loss" in x]
    assert len(steps) == 12 and all("att_loss" in x for x in steps)
    assert steps[-1]["hid_loss"] < 0.95 * steps[0]["hid_loss"], steps
    assert steps[-1]["att_loss"] < steps[0]["att_loss"], steps
    with safe_open(str(first / "step-0000012" / "model.safetensors"), "pt") as f:
        assert f.get_tensor("fit.weight").shape == (32, 16)
        first_bias = f.get_tensor("mlm.bias")
    assert torch.count_nonzero(first_bias) == 0  # weight 0: the MLM head did not learn
    assert main(["export", "--run", str(first), "--output", str(tmp_path / "hf1")]) == 0

    args = _args(shards_dir, teacher_run, second, tmp_path, "--objective", "kd")
    args += ["--temperature", "1", "--init-from", str(first)]
    capsys.readouterr()
    assert main([*args, "--max-steps", "4", "--save-every", "4"]) == 0
    config = json.loads((second / "config.json").read_text())
    assert config["model"]["teacher_width"] is None and config["temperature"] == 1.0
    lines = [json.loads(x) for x in (second / "metrics.jsonl").read_text().splitlines()]
    assert all("kd_loss" in x for x in lines if "loss" in x)
    assert main(["export", "--run", str(second), "--output", str(tmp_path / "hf2")]) == 0
    exported = json.loads((tmp_path / "hf2" / "config.json").read_text())
    assert exported["architectures"] == ["BertForMaskedLM"]


@pytest.mark.parametrize(
    ("change", "objective", "message"),
    [
        ("num_heads = 2", "att", "2 attention heads, the student has 4; att compares"),
        ("num_layers = 2", "hid", "4 layers; hid map each of the student's 3"),
    ],
)
def test_a_teacher_the_layers_cannot_map_to_is_one_line(
    shards_dir, teacher_run, tmp_path, capsys, change, objective, message
) -> None:
    replacement = {"num_heads = 2": "num_heads = 4", "num_layers = 2": "num_layers = 3"}[change]
    config = write(tmp_path / "bad.toml", STUDENT.replace(change, replacement))
    args = ["train", "--data", str(shards_dir), "--output", str(tmp_path / "r")]
    args += ["--teacher", str(teacher_run), "--config", config, "--objective", objective]
    capsys.readouterr()
    assert main([*args, "--max-steps", "2", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and "Traceback" not in "".join(err), err
    assert not (tmp_path / "r").exists()


def test_fsdp_distils_as_ddp_does(shards_dir, teacher_run, tmp_path) -> None:
    """Two processes with --fsdp reach the weights two DDP processes reach with every
    objective a teacher adds (the student's layers sharded, the teacher whole on each rank,
    the scores computed inside the sharded forward)."""
    from safetensors.torch import load_file

    from tests.trainer.test_ddp import torchrun

    config = write(
        tmp_path / "s.toml",
        f'device = "cpu"\nshuffle_buffer = 64\ntensorboard = false\nteacher = "{teacher_run}"\n'
        + STUDENT.replace("[optim]", "dropout = 0.0\nattention_dropout = 0.0\n[optim]"),
    )
    runs = {}
    for name, extra in (("ddp", []), ("fsdp", ["--fsdp"])):
        run = tmp_path / name
        args = ["--data", str(shards_dir), "--output", str(run), "--config", config]
        args += ["--objective", "mlm,kd,att,hid", "--batch-size", "4", "--max-steps", "3"]
        done = torchrun(2, [*args, "--no-progress", *extra])
        assert done.returncode == 0, done.stderr[-3000:]
        runs[name] = load_file(run / "step-0000003" / "model.safetensors")
    assert runs["ddp"].keys() == runs["fsdp"].keys() and "fit.weight" in runs["ddp"]
    for key, tensor in runs["ddp"].items():
        assert torch.allclose(tensor, runs["fsdp"][key], atol=1e-5, rtol=1e-4), key


def test_recomputed_layers_give_the_same_gradients(teacher_run) -> None:
    """With grad checkpointing the layers (and the scores kept inside them) are recomputed
    in the backward pass: the same gradients as keeping every activation."""
    student, teacher = _student(teacher_run, ["att", "hid"])
    student.train()
    for module in student.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if hasattr(module, "attention_dropout"):
            module.attention_dropout = 0.0
    batch = _batch(teacher.config.vocab_size)
    grads = []
    for checkpointing in (False, True):
        student.encoder.checkpointing = checkpointing
        student.zero_grad()
        out = student(batch)
        (out["att_loss"] + out["hid_loss"]).backward()
        grads.append(
            {n: p.grad.clone() for n, p in student.named_parameters() if p.grad is not None}
        )
    assert grads[0].keys() == grads[1].keys() and "fit.weight" in grads[0]
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, atol=1e-6, rtol=1e-5)


def test_the_teacher_runs_in_the_students_autocast_without_gradients(teacher_run) -> None:
    """Under bf16 autocast (precision auto on a GPU; asked for here on the CPU) the
    teacher's layers compute in bf16, record no graph, and every loss is finite."""
    student, teacher = _student(teacher_run, ["mlm", "kd", "att", "hid"])
    seen: list[tuple[torch.dtype, bool]] = []

    def hook(module, inputs, output) -> None:
        seen.append((output.dtype, output.requires_grad))

    handle = teacher.encoder.layers[0].attention.qkv.register_forward_hook(hook)
    student.train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = student(_batch(teacher.config.vocab_size))
    handle.remove()
    assert seen and all(dtype == torch.bfloat16 and not grad for dtype, grad in seen), seen
    assert all(torch.isfinite(out[f"{o}_loss"]) for o in ("mlm", "kd", "att", "hid"))
    assert not any(p.requires_grad for p in teacher.parameters())
