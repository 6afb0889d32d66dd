import json

import pytest

from clozeworks.cli import main


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--dupe-factor", "3"], "--dupe-factor needs --premask"),
        (["--max-seq-len", "4"], "--max-seq-len must be in 8..32767"),
        (["--premask", "span", "--dupe-factor", "0"], "--dupe-factor must be >= 1"),
        (["--short-seq-prob", "1.5"], "--short-seq-prob must be in [0, 1]"),
    ],
)
def test_bad_settings_exit_2_with_one_line(small_build, tmp_path, capsys, flags, message) -> None:
    paths, _ = small_build
    argv = ["shard", "--input", paths.docs, "--tokenizer", paths.tokenizer]
    assert main([*argv, "--output", str(tmp_path / "s"), *flags]) == 2
    assert message in one_error_line(capsys)


def test_premasked_sop_shards_from_the_command_line(small_build, tmp_path, capsys) -> None:
    paths, _ = small_build
    out = tmp_path / "sop"
    argv = ["shard", "--input", paths.docs, "--tokenizer", paths.tokenizer, "--output", str(out)]
    flags = ["--mode", "sop", "--max-seq-len", "128", "--premask", "ngram", "--num-shards", "3"]
    assert main([*argv, *flags]) == 0
    assert "3 shards" in capsys.readouterr().out
    manifest = json.loads((out / ".manifest.json").read_text())
    assert manifest["mode"] == "sop" and manifest["premask"]["kind"] == "ngram"
    assert manifest["premask"]["max_predictions"] == 19  # round(0.15 x 128)
    assert manifest["settings"]["sentence_splitter"] == "sentencex"
    assert main(["inspect", str(out), "--verify"]) == 0
