"""`cloze build`: one config for four stages, and stages skipped when nothing changed."""

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest

from clozeworks.cli import main
from clozeworks.corpus.shards.settings import ShardSettings
from clozeworks.corpus.text.demo import iter_docstrings
from clozeworks.corpus.vocab.train import VocabConfig
from clozeworks.pipelines.build import BuildConfig, run_build
from clozeworks.schemas.errors import SettingError
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
        shard=ShardSettings(max_seq_len=64),
    )
    assert _run(config) == ["clean", "dedup", "vocab", "shard"]
    manifest = root / "shards" / ".manifest.json"
    before = manifest.read_bytes()
    assert _run(config) == ["clean skipped", "dedup skipped", "vocab skipped", "shard skipped"]
    assert manifest.read_bytes() == before
    config = replace(config, shard=replace(config.shard, mode="nsp"))  # only shards rebuilt
    assert _run(config) == ["clean skipped", "dedup skipped", "vocab skipped", "shard"]
    assert json.loads(manifest.read_text())["mode"] == "nsp"
    config = replace(config, vocab=VocabConfig(kind="wordpiece", vocab_size=1100))  # and shards
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
    manifest = json.loads((tmp_path / "work" / "shards" / ".manifest.json").read_text())
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


def _build_config(argv: list[str]):
    from clozeworks.cli import build_parser
    from clozeworks.commands import build as build_verb

    args = build_parser(["build"]).parse_args(["build", *argv])
    probe = argparse.ArgumentParser(add_help=False)
    build_verb.add_arguments(probe)
    return build_verb.resolve(args, build_verb._actions(probe))


def test_every_stage_flag_is_a_build_flag_and_a_toml_key(tmp_path) -> None:
    from clozeworks.cli import build_parser

    parsers = {v: build_parser([v]) for v in ("clean", "dedup", "vocab", "build")}
    flags = {}
    for verb, parser in parsers.items():
        (sub,) = [a for a in parser._actions if a.dest == "command"]
        flags[verb] = {o for a in sub.choices[verb]._actions for o in a.option_strings}
    own = {"--rejects", "--emit-clusters"}  # outputs of their own, not build settings
    for verb in ("clean", "dedup", "vocab"):
        assert flags[verb] - own <= flags["build"], (verb, flags[verb] - flags["build"])
    toml = tmp_path / "build.toml"
    toml.write_text(
        '[clean]\nmin-chars = 500\nfilters = "length,c4"\nc4-min-sentences = 2\n'
        "[dedup]\nnear = true\nnum-perm = 128\nline-dedup = true\n"
        "[vocab]\nheldout-docs = 50\nsample-bytes = '10M'\nmin-frequency = 3\n"
    )
    common = ["--input", "raw", "--output", str(tmp_path / "o")]
    config = _build_config([*common, "--config", str(toml), "--min-chars", "300"])
    assert config.clean.filter_options["length"]["min_chars"] == 300  # the flag wins
    assert config.clean.filter_options["c4"]["min_sentences"] == 2
    assert config.dedup.num_perm == 128 and config.dedup.line_dedup
    assert config.vocab.min_frequency == 3
    assert (config.sample.sample_bytes, config.sample.heldout_docs) == (10_000_000, 50)
    # Nothing given: the stage verbs' own defaults, and build's --seed stays the shard's.
    plain = _build_config(common)
    assert plain.clean.filter_options["length"]["min_chars"] == 1  # clean's default
    assert plain.dedup.num_perm == 256 and plain.shard.seed == 12345


def test_list_and_size_flags_are_read_as_their_verbs_read_them(tmp_path) -> None:
    """Flags whose settings have a reading of their own (a list, a size) reach build's
    stages read, as `cloze clean` and `cloze vocab` read them: `--filters c4,gopher` is
    three filters, not letters; a bad one is one line naming the flag."""
    common = ["--input", "raw", "--output", str(tmp_path / "o")]
    config = _build_config([*common, "--filters", "c4,gopher", "--sample-bytes", "10M"])
    assert config.clean.filters == ("c4", "gopher-quality", "gopher-repetition")
    assert set(config.clean.filter_options) == set(config.clean.filters)
    assert config.sample.sample_bytes == 10_000_000
    with pytest.raises(SettingError, match="unknown filter 'c5'"):
        _build_config([*common, "--filters", "c5"])


def _tree(root: Path) -> dict[str, bytes]:
    """Every output file's bytes, with the run's own directory written as ROOT (the JSON
    records name their inputs)."""
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("raw/") or rel == "build.json" or "/.cloze.lock" in f"/{rel}":
            continue
        out[rel] = path.read_bytes().replace(str(root).encode(), b"ROOT")
    return out


def test_build_and_the_stages_one_by_one_write_the_same_bytes(tmp_path, capsys) -> None:
    """Issue 34, item 4: build gave dedup the shard's seed, so a build and the same stages
    run one by one disagreed (467 against 466 duplicates). Every verb now has the one
    default seed, and build passes each stage its own: same flags, same bytes."""
    built, staged = tmp_path / "built", tmp_path / "staged"
    for root in (built, staged):
        raw = _raw(root, 300)
        docs = [json.loads(line)["text"] for line in raw.read_text().splitlines()]
        long = [d for d in docs if len(d.split()) > 60][:20]
        with raw.open("a") as f:  # near-duplicates: one word changed, for MinHash to find
            for d in long:
                words = d.split()
                words[len(words) // 2] = "changed"
                f.write(json.dumps({"text": " ".join(words)}) + "\n")
    flags = {"dedup": ["--near"], "vocab": ["--vocab-size", "1500"], "shard": ["--mode", "nsp"]}
    argv = ["build", "--input", str(built / "raw"), "--output", str(built), "--no-progress"]
    assert main([*argv, *flags["dedup"], *flags["vocab"], *flags["shard"]]) == 0
    s = str(staged)
    steps = [
        ["clean", "--input", f"{s}/raw", "--output", f"{s}/clean"],
        ["dedup", "--input", f"{s}/clean", "--output", f"{s}/docs", *flags["dedup"]],
        ["vocab", "--input", f"{s}/docs", "--output", f"{s}/tokenizer", *flags["vocab"]],
        ["shard", "--input", f"{s}/docs", "--tokenizer", f"{s}/tokenizer", "--output",
         f"{s}/shards", *flags["shard"]],
    ]  # fmt: skip
    for step in steps:
        assert main([*step, "--no-progress"]) == 0, step
    capsys.readouterr()
    a, b = _tree(built), _tree(staged)
    assert sorted(a) == sorted(b)
    assert [name for name in a if a[name] != b[name]] == []
    stats = json.loads(a["docs/.stats.json"])
    assert stats["seed"] == 12345 and stats["duplicates.near"] >= 10
