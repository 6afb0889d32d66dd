"""`cloze build`: one config for four stages, and stages skipped when nothing changed."""

import json
from pathlib import Path

import pytest

from clozeworks.cli import main
from clozeworks.corpus.text.demo import iter_docstrings
from clozeworks.corpus.vocab.train import VocabConfig
from clozeworks.pipelines.build import BuildConfig, run_build
from tests.conftest import write_jsonl


def _raw(tmp_path: Path, n: int = 250) -> Path:
    docs = []
    for d in iter_docstrings():
        docs.append({"text": d["text"]})
        if len(docs) == n:
            break
    return write_jsonl(tmp_path / "raw" / "a.jsonl", docs)


def _run(config: BuildConfig) -> list[str]:
    lines: list[str] = []
    run_build(config, report=lines.append)
    return [line.split(":")[0] + (" skipped" if "skipped" in line else "") for line in lines]


@pytest.mark.slow
def test_stages_rerun_only_when_their_settings_or_input_change(tmp_path) -> None:
    raw = _raw(tmp_path)
    root = tmp_path / "work"
    config = BuildConfig(
        inputs=[str(raw.parent)],
        root=str(root),
        vocab=VocabConfig(kind="wordpiece", vocab_size=1200),
        max_seq_len=64,
    )
    assert _run(config) == ["clean", "dedup", "vocab", "shard"]
    manifest = root / "shards" / "manifest.json"
    before = manifest.read_bytes()
    assert _run(config) == ["clean skipped", "dedup skipped", "vocab skipped", "shard skipped"]
    assert manifest.read_bytes() == before
    config.mode = "nsp"  # a shard setting: only the shards are rebuilt
    assert _run(config) == ["clean skipped", "dedup skipped", "vocab skipped", "shard"]
    assert json.loads(manifest.read_text())["mode"] == "nsp"
    config.vocab = VocabConfig(kind="wordpiece", vocab_size=1100)  # new vocabulary, new shards
    assert _run(config) == ["clean skipped", "dedup skipped", "vocab", "shard"]
    manifest.unlink()  # an output that is no longer complete is rebuilt
    assert _run(config) == ["clean skipped", "dedup skipped", "vocab skipped", "shard"]
    with raw.open("a") as f:  # new raw input: everything downstream of it
        f.write(json.dumps({"text": "One more document. It has two sentences."}) + "\n")
    assert _run(config) == ["clean", "dedup", "vocab", "shard"]
    record = json.loads((root / "build.json").read_text())
    assert record["stages"]["shard"]["values"]["mode"] == "nsp"


def test_toml_config_and_flags(tmp_path, capsys) -> None:
    raw = _raw(tmp_path, n=120)
    toml = tmp_path / "build.toml"
    toml.write_text(
        f'input = ["{raw.parent}"]\noutput = "{tmp_path / "work"}"\n'
        '[vocab]\nvocab-size = 900\n[shard]\nmode = "sop"\nmax_seq_len = 64\n'
        'premask = "token"\nsequences-per-shard = 100\n'
    )
    # the flag wins over the file
    assert main(["build", "--config", str(toml), "--mode", "nsp"]) == 0
    manifest = json.loads((tmp_path / "work" / "shards" / "manifest.json").read_text())
    assert manifest["mode"] == "nsp" and manifest["max_seq_len"] == 64
    assert manifest["premask"]["kind"] == "token" and manifest["vocab_size"] <= 900
    capsys.readouterr()
    assert main(["build", "--config", str(toml), "--mode", "nsp"]) == 0
    assert capsys.readouterr().out.count("skipped") == 4


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[shard]\nmodee = "nsp"\n', "unknown setting 'shard.modee'"),
        ('[shard]\nmode = "nsq"\n', "shard.mode must be one of"),
        ("[shard]\nmax-seq-len = 'long'\n", "shard.max-seq-len must be a number"),
        ("mode = \n", "not valid TOML"),
    ],
)
def test_bad_toml_is_named(tmp_path, capsys, text: str, message: str) -> None:
    toml = tmp_path / "build.toml"
    toml.write_text(text)
    argv = ["build", "--config", str(toml), "--input", "x", "--output", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"cloze build: error: {toml}") and message in err, err
