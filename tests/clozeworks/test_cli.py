import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import webdataset as wds

from clozeworks.cli import COMMANDS, build_parser, main


def test_help_lists_every_verb(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for verb in ("clean", "dedup", "vocab", "shard", "build", "train", "export", "inspect", "demo"):
        assert verb in out
    assert set(COMMANDS) >= {
        "clean",
        "dedup",
        "vocab",
        "shard",
        "build",
        "train",
        "export",
        "inspect",
        "demo",
    }
    for verb in COMMANDS:
        assert main([verb, "--help"]) == 0


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def test_clean_missing_input_exits_2_naming_it(tmp_path, capsys) -> None:
    assert main(["clean", "--input", "does-not-exist", "--output", str(tmp_path / "o")]) == 2
    assert one_error_line(capsys) == (
        "cloze clean: error: does-not-exist: no such file or directory (or nothing in it)"
    )


@pytest.mark.parametrize("verb", ["train", "inspect"])
def test_shard_dir_without_manifest_is_refused(tmp_path, capsys, verb) -> None:
    (tmp_path / "shard-000000.tar").write_bytes(b"\0" * 512)
    args = (
        [
            "train",
            "--data",
            str(tmp_path),
            "--output",
            str(tmp_path.parent / f"{tmp_path.name}-run"),
        ]
        if verb == "train"
        else ["inspect", str(tmp_path)]
    )
    assert main(args) == 2
    assert "no .manifest.json" in one_error_line(capsys)


def test_unknown_flag_on_a_non_beam_verb_is_bad_usage(tmp_path, capsys) -> None:
    assert main(["inspect", str(tmp_path), "--runner", "DataflowRunner"]) == 2
    assert "unrecognized argument --runner: not one of this command's flags" in one_error_line(
        capsys
    )


def test_export_of_a_directory_that_is_not_a_run_says_so(tmp_path, capsys) -> None:
    hf = tmp_path.parent / f"{tmp_path.name}-hf"
    assert main(["export", "--run", str(tmp_path), "--output", str(hf)]) == 2
    assert "not a training run directory" in one_error_line(capsys)


def test_bad_docs_dir_for_dedup(tmp_path, capsys) -> None:
    (tmp_path / "docs").mkdir()
    assert main(["dedup", "--input", str(tmp_path / "docs"), "--output", str(tmp_path / "o")]) == 2
    assert "no .stats.json" in one_error_line(capsys)


def test_demo_runs_the_whole_chain(tmp_path, capsys) -> None:
    out = tmp_path / "demo"
    code = main(
        [
            "demo",
            "--output",
            str(out),
            "--limit-docs",
            "400",
            "--steps",
            "8",
            "--vocab-size",
            "1500",
            "--no-probe",
            "--no-progress",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "MLM loss: first" in printed and "verified: every checksum" in printed
    manifest = json.loads((out / "shards" / ".manifest.json").read_text())
    urls = [str(out / "shards" / s["name"]) for s in manifest["shards"]]
    blocks = list(wds.WebDataset(urls, shardshuffle=False).decode())
    assert sum(len(b["offsets.npy"]) - 1 for b in blocks) == manifest["totals"]["sequences"]
    assert (out / "run" / "step-0000008" / "COMMITTED").is_file()
    for stage in ("docs", "tokenizer", "shards", "run"):
        assert main(["inspect", str(out / stage), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["kind"] in ("docs", "tokenizer", "shards", "run")


def test_demo_output_does_not_depend_on_where_it_is_written(tmp_path, capsys) -> None:
    """Two demos into different directories: the same tokenizer and the same shard bytes."""
    outs = [tmp_path / "a", tmp_path / "deeper" / "b"]
    for out in outs:
        args = ["demo", "--output", str(out), "--limit-docs", "300", "--steps", "2"]
        assert main([*args, "--vocab-size", "1200", "--no-probe", "--no-progress"]) == 0
    capsys.readouterr()
    a, b = (json.loads((o / "shards" / ".manifest.json").read_text()) for o in outs)
    assert a["tokenizer_sha256"] == b["tokenizer_sha256"]
    assert [s["sha256"] for s in a["shards"]] == [s["sha256"] for s in b["shards"]]


def test_inspect_verify_names_damaged_shards(shards_dir, tmp_path, capsys) -> None:
    copy = tmp_path / "shards"
    shutil.copytree(shards_dir, copy)
    assert main(["inspect", str(copy), "--verify", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["problems"] == [] and summary["read"]["sequences"] == summary["sequences"]
    names = sorted(p.name for p in copy.glob("shard-*.tar"))
    flipped = copy / names[0]
    data = bytearray(flipped.read_bytes())
    data[1000] ^= 0xFF
    flipped.write_bytes(bytes(data))
    (copy / names[1]).unlink()
    assert main(["inspect", str(copy), "--verify"]) == 1
    out = capsys.readouterr().out
    assert f"BAD {names[0]}: sha256 does not match" in out
    assert f"BAD {names[1]}: file is missing" in out


def test_python_dash_m_clozeworks_works_from_the_checkout() -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "clozeworks", "--help"], cwd=root, capture_output=True, text=True
    )
    assert done.returncode == 0 and "demo" in done.stdout


def _cloze(*args: str) -> subprocess.CompletedProcess:
    """A real process, so stderr holds everything: Beam's logging as well as ours."""
    return subprocess.run(
        [sys.executable, "-m", "clozeworks", *args], capture_output=True, text=True, timeout=300
    )


def test_errors_are_one_line_on_the_real_stderr_and_tracebacks_need_debug(tmp_path) -> None:
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(gzip.compress(b'{"text": "x"}\n' * 1000)[:-40])
    done = _cloze("clean", "--input", str(broken), "--output", str(tmp_path / "docs"))
    # Beam logs the failing step's traceback at ERROR before re-raising; none of it shows.
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("cloze clean: error: ") and "broken.jsonl.gz" in done.stderr

    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("not a directory")
    good = tmp_path / "ok.jsonl"
    good.write_text('{"text": "a short document"}\n')
    done = _cloze("clean", "--input", str(good), "--output", str(in_the_way / "docs"))
    # An output that cannot be one is the command line's fault: exit 2, the user's path.
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"{in_the_way}: exists and is not a directory" in done.stderr
    debug = _cloze("--debug", "clean", "--input", str(good), "--output", str(in_the_way / "d"))
    assert debug.returncode == 1 and "Traceback" in debug.stderr  # Python's own exit


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            [
                "shard",
                "--input",
                "d",
                "--tokenizer",
                "t",
                "--output",
                "o",
                "--max-seq-length",
                "64",
            ],
            "unrecognized argument --max-seq-length: not one of this command's or Beam's flags; "
            "did you mean --max-seq-len?",
        ),
        (["build", "--output", "o", "--vocab-sise", "100"], "did you mean --vocab-size?"),
        (["clean", "--input", "i", "--output", "o", "--runer", "DirectRunner"], "--runner?"),
        (["export", "--run", "r", "--output", "o", "--stepp", "5"], "did you mean --step?"),
        (["dedup", "--input", "i", "--output", "o", "--threshold", "0.7"], "only with --near"),
        # A stray value stays one even when Beam flags follow it.
        (
            ["clean", "--input", "i", "--output", "o", "--filters", "c4", "gopher", "--runner=X"],
            "unexpected value 'gopher': no flag before it takes it",
        ),
        (["clean", "--input", "i", "--output", "o", "gopher"], "unexpected value 'gopher'"),
        # A flag of cloze itself after the command is not a typo of itself.
        (["clean", "--input", "i", "--output", "o", "--debug"], "give it before the command"),
        (["export", "--run", "r", "--output", "o", "--verbose"], "is a flag of `cloze` itself"),
    ],
)
def test_a_flag_that_would_be_ignored_is_refused(tmp_path, capsys, argv, message) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_beam_flags_still_reach_beam(tmp_path, capsys) -> None:
    raw = tmp_path / "in.jsonl"
    raw.write_text('{"text": "a short document"}\n')
    out = tmp_path / "docs"
    args = ["clean", "--input", str(raw), "--output", str(out)]
    assert main([*args, "--runner", "DirectRunner", "--direct_num_workers=1"]) == 0
    assert (out / ".stats.json").exists()


def test_inspect_into_a_closed_pipe_is_quiet(shards_dir) -> None:
    # `cloze inspect ... | head -1`: the reader leaves after one line, long before the end.
    argv = [sys.executable, "-m", "clozeworks", "inspect", str(shards_dir), "--show", "100000"]
    whole = subprocess.run(argv, capture_output=True, timeout=300)
    assert len(whole.stdout) > 1 << 18  # far more than a pipe buffers: the write must fail
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and err == b"", err


def test_help_shows_defaults(capsys) -> None:
    assert main(["shard", "--help"]) == 0
    out = capsys.readouterr().out
    assert "(default: 128)" in out and "(default: full-" in out


def test_print_config_is_the_effective_config_and_reads_back(tmp_path, capsys) -> None:
    (tmp_path / "mine.toml").write_text("[model]\nnum_layers = 3\n")
    args = ["train", "--preset", "bert-base", "--config", str(tmp_path / "mine.toml")]
    assert main([*args, "--lr", "3e-4", "--print-config"]) == 0
    printed = capsys.readouterr().out
    config = json.loads(printed)
    assert config["model"]["num_layers"] == 3 and config["model"]["hidden_size"] == 768
    assert config["optim"]["lr"] == 3e-4
    (tmp_path / "effective.json").write_text(printed)
    assert main(["train", "--config", str(tmp_path / "effective.json"), "--print-config"]) == 0
    assert capsys.readouterr().out == printed


TWO_WORKER_PROCESSES = ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]


def test_two_worker_processes_are_quiet_and_their_errors_one_line(tmp_path) -> None:
    lines = "".join(json.dumps({"text": f"document {i} " * 40}) + "\n" for i in range(400))
    good = tmp_path / "good.jsonl"
    good.write_text(lines)
    cut = tmp_path / "cut.jsonl.gz"
    whole = gzip.compress(lines.encode())
    cut.write_bytes(whole[: len(whole) // 2])
    runs = {}
    for name, raw in (("good", good), ("cut", cut)):
        argv = ["clean", "--input", str(raw), "--output", str(tmp_path / name)]
        runs[name] = subprocess.run(
            [sys.executable, "-m", "clozeworks", *argv, *TWO_WORKER_PROCESSES],
            capture_output=True,
            text=True,
            timeout=300,
        )
    # Beam's worker processes log at INFO to the stderr they inherit; none of it shows.
    assert runs["good"].returncode == 0 and runs["good"].stderr == ""
    assert "kept 400" in runs["good"].stdout
    # A worker's exception arrives as its traceback's text: still our one line.
    assert runs["cut"].returncode == 2
    err = runs["cut"].stderr
    assert err.startswith(f"cloze clean: error: {cut}: cannot read (") and err.count("\n") == 1


@pytest.mark.parametrize("verb", ["vocab", "build"])
def test_case_flags_are_spelled_the_same_in_vocab_and_build(verb) -> None:
    parser = build_parser([verb])
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    verb_parser = sub.choices[verb]
    flags = {o for a in verb_parser._actions for o in a.option_strings}
    assert {"--cased", "--no-cased", "--uncased"} <= flags
    required = ["--input", "i", "--output", "o"]
    for flag, cased in (("--cased", True), ("--no-cased", False), ("--uncased", False)):
        assert verb_parser.parse_args([*required, flag]).cased is cased
    assert verb_parser.parse_args(required).cased is None  # the verb's default decides


def test_options_of_any_beam_options_class_are_beam_flags(tmp_path) -> None:
    """A runner's options may subclass another options class (not PipelineOptions
    directly); their flags are Beam's, not unknown ones (issue 32)."""
    from apache_beam.options.pipeline_options import StandardOptions

    class _SomeRunnerOptions(StandardOptions):
        @classmethod
        def _add_argparse_args(cls, parser) -> None:
            parser.add_argument("--some_runner_endpoint", default=None)

    raw = tmp_path / "in.jsonl"
    raw.write_text('{"text": "a short document of a few words"}\n')
    argv = ["clean", "--input", str(raw), "--output", str(tmp_path / "o")]
    assert main([*argv, "--some_runner_endpoint=localhost:1"]) == 0
    assert main([*argv, "--some_runner_endpont=localhost:1"]) == 2  # a typo is still refused


def test_ctrl_c_inside_rust_code_is_exit_130_in_one_line(
    small_build, tmp_path, capsys, monkeypatch
) -> None:
    """tokenizers turns SIGINT into RuntimeError("KeyboardInterrupt"), and Beam re-raises
    it with the step appended: shard printed two tracebacks and exited 1 (issue 33)."""
    from clozeworks.corpus.vocab import fast

    def interrupted(*args, **kwargs):
        raise RuntimeError("KeyboardInterrupt")

    # What every encoder's ids pass through, right after the Rust call returns.
    monkeypatch.setattr(fast, "flat_ids", interrupted)
    paths, _ = small_build
    out = tmp_path / "shards"
    argv = ["shard", "--input", paths.docs, "--tokenizer", paths.tokenizer, "--output", str(out)]
    assert main([*argv, "--no-progress"]) == 130
    err = capsys.readouterr().err.strip()
    assert err == "cloze shard: error: interrupted"
    assert not [p for p in out.rglob("*") if p.is_file()]  # nothing that looks like output
