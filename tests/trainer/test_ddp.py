"""`torchrun --nproc-per-node 2 -m clozeworks train` on the CPU (gloo): both ranks take every step,
rank 0 alone writes, and the result is the single-process result for the same global batch
(the two ranks' batches as two micro-batches of one step)."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from clozeworks.schemas.manifest import read_manifest
from clozeworks.trainer.batch_index import prepare
from clozeworks.trainer.config import load_config_file
from clozeworks.trainer.datasets import dataset_for
from clozeworks.trainer.distributed import Dist
from clozeworks.trainer.loop import _Run
from clozeworks.trainer.presets import preset
from tests.env import ROOT, python_path

STEPS = 6
SETTINGS = """
device = "cpu"
batch_size = 4
max_steps = 6
save_every = 3
log_every = 1
shuffle_buffer = 64
tensorboard = false
objectives = ["mlm", "nsp"]
[model]
hidden_size = 32
num_layers = 2
num_heads = 2
intermediate_size = 64
dropout = 0.0
attention_dropout = 0.0
[optim]
lr = 1e-3
warmup_steps = 2
"""


def test_two_cpu_processes_match_one_process_on_the_same_global_batch(nsp_shards, tmp_path) -> None:
    config_file = tmp_path / "ddp.toml"
    config_file.write_text(SETTINGS, encoding="utf-8")
    run = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "clozeworks",
        "train",
        "--data",
        str(nsp_shards),
        "--output",
        str(run),
        "--config",
        str(config_file),
        "--no-progress",
    ]
    env = {**os.environ, "PYTHONPATH": python_path(), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("trained 6 steps") == 1  # rank 0 alone reports

    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))  # written once, by rank 0
    state = json.loads((run / f"step-{STEPS:07d}" / "state.json").read_text())
    # Every rank's loader position and RNG states (dropout differs per rank) are kept.
    assert len(state["ranks"]) == 2 and all(r["loader"]["batches"] == 6 for r in state["ranks"])
    assert state["ranks"][0]["rng"]["torch"] != state["ranks"][1]["rng"]["torch"]

    reference, step_sums = two_ranks_in_one_process(config_file, nsp_shards, STEPS, tmp_path)
    losses = [float(sums["loss"]) / 2 for sums in step_sums]
    ddp = load_file(run / f"step-{STEPS:07d}" / "model.safetensors")
    ours = reference.model.state_dict()
    for name, tensor in ddp.items():
        assert torch.allclose(tensor, ours[name], atol=1e-5, rtol=1e-4), name
    for record, loss in zip(records, losses, strict=True):
        assert abs(record["loss"] - loss) <= 1e-5 * loss


def torchrun(nproc: int, args: list[str]) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc-per-node", str(nproc), "-m", "clozeworks", "train", *args]
    env = {**os.environ, "PYTHONPATH": python_path(), "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def two_ranks_in_one_process(
    config_file: Path, shards: Path, steps: int, tmp_path: Path
) -> tuple[_Run, list[dict[str, torch.Tensor]]]:
    """One process taking the global batch of two ranks of 4 (rank r's batch is
    micro-batch r of each step) for `steps` steps: the run and each step's sums."""
    config = replace(load_config_file(config_file, preset("bert-tiny")), grad_accum=2)
    reference = _Run(config, shards, tmp_path / "one", Dist())
    manifest = read_manifest(shards)
    loaders = [
        iter(dataset_for(config, str(shards), 4, Dist(rank=r, world_size=2), manifest).loader())
        for r in range(2)
    ]
    sums = [
        reference._step([prepare(next(loader), config.unpad) for loader in loaders])[0]
        for _ in range(steps)
    ]
    return reference, sums


def test_a_run_resumes_on_another_number_of_processes(nsp_shards, tmp_path) -> None:
    """2 -> 1 and 1 -> 2 gloo processes; each sequence of the interrupted epoch is read
    once (the loader's elastic resume, tests/trainer/data/test_elastic.py), and the run
    goes on from the checkpoint's step."""
    config_file = tmp_path / "ddp.toml"
    config_file.write_text(SETTINGS.replace("max_steps = 6", "max_steps = 8"), encoding="utf-8")
    for first, second in ((2, 1), (1, 2)):
        run = tmp_path / f"run{first}{second}"
        args = ["--data", str(nsp_shards), "--output", str(run), "--config", str(config_file)]
        args += ["--no-progress"]
        done = torchrun(first, [*args, "--max-steps", "3"])
        assert done.returncode == 0, done.stderr[-3000:]
        done = torchrun(second, [*args, "--resume"])
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"written by {first} rank(s), this run has {second}" in done.stderr
        records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in records] == list(range(1, 9))
        state = json.loads((run / "step-0000008" / "state.json").read_text())
        assert len(state["ranks"]) == second
        loader = state["ranks"][0]["loader"]
        # Still in the epoch the first run began: its layout is the history.
        assert [h["world_size"] for h in loader["history"]] == [first]
        assert loader["history"][0]["batches"] == 3


FAMILIES = {
    "bert": "",
    "roberta": 'family = "roberta"\ntype_vocab_size = 0\n',
    "albert": 'family = "albert"\nembedding_size = 16\nshare = "all"\n',
    "electra": 'family = "electra"\nembedding_size = 16\ngenerator_fraction = 0.5\n',
}


def fsdp_against_ddp(family: str, shards: Path, tmp_path: Path) -> None:
    """Two processes with --fsdp reach the weights two DDP processes reach (same global
    batch, same initial weights), through a checkpoint and a resume."""
    objectives = {"roberta": '["mlm"]', "electra": '["mlm", "rtd"]'}.get(family, '["mlm", "nsp"]')
    text = SETTINGS.replace('objectives = ["mlm", "nsp"]', f"objectives = {objectives}")
    text = text.replace("[model]\n", "[model]\n" + FAMILIES[family])
    config_file = tmp_path / f"{family}.toml"
    config_file.write_text(text, encoding="utf-8")
    runs = {}
    for name, extra in (("ddp", []), ("fsdp", ["--fsdp"])):
        run = tmp_path / f"{family}-{name}"
        args = ["--data", str(shards), "--output", str(run), "--config", str(config_file)]
        args += ["--no-progress", "--objective", objectives.strip("[]").replace('"', "")]
        args = [a.replace(" ", "") for a in args]
        done = torchrun(2, [*args, *extra, "--max-steps", "3"])
        assert done.returncode == 0, done.stderr[-3000:]
        done = torchrun(2, [*args, *extra, "--max-steps", "5", "--resume"])
        assert done.returncode == 0, done.stderr[-3000:]
        runs[name] = load_file(run / "step-0000005" / "model.safetensors")
    assert runs["ddp"].keys() == runs["fsdp"].keys()
    for key, tensor in runs["ddp"].items():
        assert torch.allclose(tensor, runs["fsdp"][key], atol=1e-5, rtol=1e-4), key


def test_fsdp_trains_resumes_and_matches_ddp(nsp_shards, tmp_path, capsys) -> None:
    fsdp_against_ddp("bert", nsp_shards, tmp_path)
    # Its optimizer state is keyed by name: a run without --fsdp says so, not "damaged".
    from clozeworks.cli import main

    args = ["train", "--data", str(nsp_shards), "--output", str(tmp_path / "bert-fsdp")]
    args += ["--config", str(tmp_path / "bert.toml"), "--max-steps", "6", "--resume"]
    assert main([*args, "--objective", "mlm,nsp"]) == 2
    assert "written by an --fsdp run; resume with --fsdp" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("family", ["roberta", "albert", "electra"])
def test_fsdp_matches_ddp_for_every_family(family, nsp_shards, tmp_path) -> None:
    fsdp_against_ddp(family, nsp_shards, tmp_path)


class _Tied(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.predict = torch.nn.Linear(3, 1, bias=False)
        self.embed = torch.nn.Embedding(2, 3)
        self.decoder = torch.nn.Linear(3, 2, bias=False)
        self.decoder.weight = self.embed.weight


def test_gathered_weights_are_written_whole_and_a_tied_weight_stays_one(tmp_path) -> None:
    """A gathered parameter smaller than the padded shards is a view into a larger buffer,
    which safetensors refuses to write; `full_state` hands over owning copies, and a weight
    under two names (tied) stays one tensor, written once."""
    from safetensors.torch import load_model, save_model

    from clozeworks.trainer.fsdp import _owning

    buffer = torch.arange(8, dtype=torch.float32)
    row = buffer[:3].view(1, 3)  # as ELECTRA's one-row rtd.predict.weight came back
    table = torch.randn(2, 3)
    gathered = {"predict.weight": row, "embed.weight": table, "decoder.weight": table}
    for weights, writes in ((gathered, False), (_owning(gathered), True)):
        with torch.device("meta"):
            model = _Tied()
        model.load_state_dict(weights, assign=True)
        path = tmp_path / f"{writes}.safetensors"
        if not writes:
            with pytest.raises(RuntimeError, match="covering the entire storage"):
                save_model(model, str(path))
            continue
        assert model.decoder.weight.data_ptr() == model.embed.weight.data_ptr()
        save_model(model, str(path))
        assert len(load_file(path)) == 2  # the tied weight once
        loaded = _Tied()
        load_model(loaded, str(path))
        assert torch.equal(loaded.predict.weight, row) and torch.equal(loaded.decoder.weight, table)
