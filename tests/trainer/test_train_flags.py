"""Train settings the shard set decides (issue 16, item 3)."""

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from clozeworks.cli import main
from clozeworks.corpus.shards.blocks import write_manifest
from clozeworks.schemas.manifest import read_manifest
from clozeworks.schemas.masking import MaskingSettings


def args(data, run, *extra: str) -> list[str]:
    common = ["--max-steps", "2", "--warmup", "1", "--batch-size", "4", "--save-every", "2"]
    common.append("--no-progress")
    return ["train", "--data", str(data), "--output", str(run), *common, *extra]


def test_bert_on_nsp_pairs_trains_nsp_unless_told_otherwise(nsp_shards, tmp_path, capsys) -> None:
    assert main(args(nsp_shards, tmp_path / "a")) == 0
    assert "objectives: mlm,nsp" in capsys.readouterr().err
    logged = json.loads((tmp_path / "a" / "metrics.jsonl").read_text().splitlines()[-1])
    assert "nsp_loss" in logged
    assert main(args(nsp_shards, tmp_path / "b", "--objective", "mlm")) == 0
    logged = json.loads((tmp_path / "b" / "metrics.jsonl").read_text().splitlines()[-1])
    assert "nsp_loss" not in logged and "objectives:" not in capsys.readouterr().err


def test_dynamic_masking_flags_on_premasked_shards_are_refused(shards_dir, tmp_path, capsys):
    copy = tmp_path / "shards"
    shutil.copytree(shards_dir, copy)
    manifest = read_manifest(copy)
    # Only the manifest's claim matters for the check, which runs before any block is read.
    write_manifest(copy, replace(manifest, premask=MaskingSettings(kind="token")))
    assert main(args(copy, tmp_path / "run", "--masking", "span")) == 2
    err = capsys.readouterr().err.strip()
    assert "--masking span cannot take effect" in err and "pre-masked (token)" in err


def test_every_setting_of_the_toml_is_a_flag(capsys) -> None:
    from dataclasses import fields

    from clozeworks.cli import build_parser
    from clozeworks.trainer.config import TrainConfig

    parser = build_parser(["train"])
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    flags = {o for a in sub.choices["train"]._actions for o in a.option_strings}
    spelled = {"objectives": "--objective", "phase2": "--phase2-data", "mixture": "--data"}
    sections = {"model", "optim", "masking"}  # each field through --set SECTION.NAME=...
    for f in fields(TrainConfig):
        if f.name not in sections:
            flag = spelled.get(f.name, "--" + f.name.replace("_", "-"))
            assert flag in flags, f"{f.name} has no flag"
    # --set reaches every section field, typed as the TOML file would be.
    argv = ["train", "--print-config", "--set", "model.share=ffn", "--set", "masking.prob=0.2"]
    argv += ["--set", "optim.decay_steps=500", "--set", "objectives=['mlm', 'sop']"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["model"]["share"] == "ffn" and printed["masking"]["prob"] == 0.2
    assert printed["optim"]["decay_steps"] == 500 and printed["objectives"] == ["mlm", "sop"]
    assert main(["train", "--print-config", "--set", "masking.prob=lots"]) == 2
    assert "masking" in capsys.readouterr().err


def test_loader_settings_reach_the_loader(shards_dir, tmp_path, capsys) -> None:
    def damaged(name: str, keep: int | None) -> tuple[Path, str]:
        """A copy with one flipped byte, which only a checksum sees, in every shard but
        shard `keep`: whichever shards a two-step run reads first, it meets a damaged one."""
        copy = tmp_path / name
        shutil.copytree(shards_dir, copy)
        shards = sorted(copy.glob("shard-*.tar"))
        bad = [s for i, s in enumerate(shards) if i != keep]
        for shard in bad:
            data = bytearray(shard.read_bytes())
            data[len(data) // 2] ^= 0xFF
            shard.write_bytes(bytes(data))
        return copy, "|".join(s.name for s in bad)

    every, names = damaged("every", None)
    assert main([*args(every, tmp_path / "a"), "--verify-shards"]) != 0
    assert re.search(names, capsys.readouterr().err)
    some, names = damaged("some", 0)
    with pytest.warns(UserWarning, match=names):  # skipped, with a warning naming them
        skip = [*args(some, tmp_path / "b"), "--verify-shards", "--on-error", "skip"]
        assert main(skip) == 0
    assert main(args(every, tmp_path / "c")) == 0  # unchecked, the flipped byte is data
