"""`cloze inspect SHARDS --reencode N`: the shard set's decoded text encoded by the fast
encoder and by `tokenizers`; the manifest's record of the encoders that made the set."""

from __future__ import annotations

import json

from clozeworks.cli import main
from clozeworks.corpus.inspect import reencode
from clozeworks.corpus.vocab import fast
from clozeworks.schemas.manifest import read_manifest


def test_the_decoded_text_gets_the_same_ids(shards_dir, capsys) -> None:
    assert main(["inspect", str(shards_dir), "--reencode", "20", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    check = summary["reencode"]
    manifest = read_manifest(shards_dir)
    assert check["differ"] == 0 and check["texts"] >= 20 * len(manifest.shards)
    assert sum(check["encoded_here"].values()) == check["texts"]
    # the manifest's counters: every sentence of the build, under a package and version
    assert summary["encoded_by"] == reencode.built_with(manifest)
    assert sum(summary["encoded_by"].values()) > manifest.sequences
    assert all(" " in label for label in summary["encoded_by"])
    assert main(["inspect", str(shards_dir), "--reencode", "3"]) == 0
    out = capsys.readouterr().out
    assert "encoded by " in out and "reencoded" in out and "the same ids" in out


def _off_by_one(tok):
    _, encode = fast.fast_encoder(tok)

    def wrong(texts):
        ids, lengths = encode(texts)
        return ids + 1, lengths

    wrong.counts = {"wrong 1.0": 1}  # type: ignore[attr-defined]
    return "wrong", wrong


def test_other_ids_are_a_problem(shards_dir, capsys, monkeypatch) -> None:
    monkeypatch.setattr(reencode, "fast_encoder", _off_by_one)
    assert main(["inspect", str(shards_dir), "--reencode", "2", "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["reencode"]["differ"] == summary["reencode"]["texts"] > 0
    assert any("get other ids" in p["problem"] for p in summary["problems"])
    assert any("this machine's encoder is wrong 1.0" in w for w in summary["warnings"])


def test_reencode_applies_to_shard_sets_only(small_build, capsys) -> None:
    paths, _ = small_build
    assert main(["inspect", paths.docs, "--reencode", "2"]) == 2
    assert "--reencode apply to shard sets" in capsys.readouterr().err
