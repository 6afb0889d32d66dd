"""Train settings the shard set decides (issue 16, item 3)."""

import json
import shutil
from dataclasses import replace

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
