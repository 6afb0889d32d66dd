"""`cloze train`'s flags, TOML keys and config.json resolve as they always have: every
command below (the README's, the docs', and one for each flag and spelling) prints the
configuration pinned in pinned_train_configs.json, recorded before the flags were derived
from the settings. Regenerate only for a change meant to be seen (and in CHANGELOG.md):
CLOZEWORKS_PIN=1 pytest tests/trainer/test_train_replay.py"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest

from clozeworks.cli import main

ROOT = Path(__file__).parents[2]
PINNED = Path(__file__).parent / "pinned_train_configs.json"


def _readme_toml() -> str:
    """The README's run.toml example, as written there."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```toml\n(# run.toml.*?)```", text, re.S)
    assert block is not None, "the README lost its run.toml example"
    return block.group(1)


def _readme_train_lines() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [m.group(1) for m in re.finditer(r"^ *cloze train +(--data .*)$", text, re.M)]


# Every flag of `cloze train` that sets a setting, each spelling once, and the
# combinations whose order matters (--warmup steps clear a share; --set before flags).
FLAG_COMMANDS = [
    "",
    "--preset bert-base",
    "--preset roberta-base",
    "--preset albert-base",
    "--preset electra-small",
    "--preset gpt2-small",
    "--preset t5-small",
    "--preset xlnet-base",
    "--objective mlm,sop",
    "--objective mlm,sbo --masking span",
    "--max-steps 77 --batch-size 9 --grad-accum 3",
    "--optim roberta",
    "--optim albert --lr 0.002",
    "--lr 3e-4",
    "--warmup 0.06",
    "--warmup 6%",
    "--warmup 250",
    "--warmup-steps 40",
    "--preset roberta-base --warmup 100",
    "--force-warmup",
    "--masking wwm",
    "--save-every 7 --keep 2 --log-every 3",
    "--eval-data held --eval-every 5 --eval-batches 4",
    "--eval-split 0.01",
    "--eval-split 2%",
    "--phase2-data p2 --phase2-step 90",
    "--phase2-data p2 --phase2-step 90 --phase2-batch-size 8",
    "--init-from somewhere",
    "--teacher somewhere",
    "--teacher somewhere --temperature 4 --objective mlm,kd",
    "--seed 7",
    "--device cpu",
    "--device cuda --precision bf16",
    "--precision fp16",
    "--compile --deterministic",
    "--fsdp",
    "--no-fsdp",
    "--unpad",
    "--no-unpad",
    "--grad-checkpointing",
    "--no-grad-checkpointing",
    "--num-workers 2 --shuffle-buffer 100",
    "--verify-shards --on-error skip",
    "--no-verify-shards",
    "--shard-cache /tmp/c --shard-cache-gb 1.5",
    "--report-to none",
    "--report-to tensorboard",
    "--no-tensorboard",
    "--set model.hidden_size=256 --set model.num_heads=4",
    "--set \"objectives=['mlm','sop']\" --set model.family=albert",
    "--set optim.lr=1e-3 --lr 2e-3",
    "--set masking.prob=0.2 --set masking.kind=span",
    "--set batch_size=5 --batch-size 6",
    "--set optim.warmup_ratio=0.1 --warmup-steps 30",
    "--set report_to=none",
    "--set tensorboard=false",
    "--config {toml}",
    "--config {toml} --batch-size 3",
    "--config {json}",
]


def _commands() -> list[str]:
    readme = [line.replace(" --resume", "") for line in _readme_train_lines()]
    # bench/README's example of the shard-free half of --print-config.
    return [*readme, *FLAG_COMMANDS]


def _resolved(command: str, tmp: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    toml = tmp / "run.toml"
    toml.write_text(_readme_toml(), encoding="utf-8")
    config_json = tmp / "config.json"
    config_json.write_text(
        json.dumps({"data": "x", "batch_size": 11, "optim": {"lr": 5e-4}}), encoding="utf-8"
    )
    argv = shlex.split(command.format(toml=toml, json=config_json))
    # Shard-free: the data's own settings (its vocabulary, pair objective, a mixture's
    # sets) are test_train_flags.py's and test_mixture.py's.
    argv = _drop_flag(_drop_flag(argv, "--output"), "--data")
    assert main(["train", *argv, "--print-config", "--no-progress"]) == 0, command
    return json.loads(capsys.readouterr().out)


def _drop_flag(argv: list[str], flag: str) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == flag:
            skip = True
            continue
        out.append(a)
    return out


def test_every_train_command_resolves_as_pinned(tmp_path, capsys) -> None:
    got = {c: _resolved(c, tmp_path, capsys) for c in _commands()}
    _assert_pinned(got, PINNED)


def _assert_pinned(got: dict, path: Path) -> None:
    """`got` equals what `path` pins, command by command (CLOZEWORKS_PIN=1 pins it)."""
    if os.environ.get("CLOZEWORKS_PIN"):
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    pinned = json.loads(path.read_text(encoding="utf-8"))
    assert set(got) == set(pinned), "the commands changed: pin them again"
    for command, outcome in got.items():
        assert outcome == pinned[command], command


# Values no run can use: each is refused with the exit code and line pinned beside the
# configurations (a flag's error names the flag, a file's the file and key).
BAD_COMMANDS = [
    "--batch-size 0",
    "--max-steps -3",
    "--seed -1",
    "--num-workers -1",
    "--shard-cache-gb -1",
    "--eval-split 0.7",
    "--eval-every -1",
    "--warmup -1",
    "--warmup 2.5",
    "--lr 0",
    "--lr nan",
    "--precision fp8",
    "--on-error maybe",
    "--objective bogus",
    "--precision fp16 --fsdp",
    "--temperature 0",
    "--objective mlm,kd,cos",
    "--eval-data x --eval-split 0.1",
    "--phase2-step 9",
    "--set model.num_heads=0",
    "--set model.hidden_size=-8",
    "--set model.dropout=2",
    "--set optim.lr=nan",
    "--set optim.warmup_steps=-5",
    "--set model.family=bogus",
    "--set model.share=bogus",
    "--set optim.name=sgd",
    "--set on_error=maybe",
    "--set precision=fp8",
    "--set \"model.hidden_size='768'\"",
    "--set model.dropout=true",
    "--set bogus=1",
    "--set model.bogus=1",
    "--set seed=-4",
    "--set model.hidden_size=101",
]


def test_every_bad_value_is_refused_as_pinned(tmp_path, capsys) -> None:
    got = {}
    for command in BAD_COMMANDS:
        code = main(["train", *shlex.split(command), "--print-config", "--no-progress"])
        got[command] = [code, capsys.readouterr().err.strip()]
    _assert_pinned(got, PINNED.with_name("pinned_train_errors.json"))
