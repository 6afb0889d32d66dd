"""A new run never writes into another run's directory (issue 14, case 2)."""

from pathlib import Path

from clozeworks.cli import main
from clozeworks.trainer.checkpoint import committed_steps
from clozeworks.trainer.rundir import claim_problem


def tiny_run(shards: Path, run: Path, *extra: str) -> list[str]:
    return [
        "train",
        "--data",
        str(shards),
        "--output",
        str(run),
        "--max-steps",
        "4",
        "--warmup",
        "0.1",
        "--batch-size",
        "4",
        "--save-every",
        "2",
        "--no-progress",
        *extra,
    ]


def test_the_rules(tmp_path) -> None:
    run = tmp_path / "run"
    assert claim_problem(run, resume=False, overwrite=False) is None  # absent: a new run
    run.mkdir()
    assert claim_problem(run, resume=False, overwrite=False) is None  # empty: a new run
    assert "no run to resume" in claim_problem(run, resume=True, overwrite=False)
    (run / "notes.txt").write_text("mine")
    assert "not a run" in claim_problem(run, resume=False, overwrite=False)
    assert "not other files" in claim_problem(run, resume=False, overwrite=True)
    assert (run / "notes.txt").exists()  # never deleted: not a run directory
    (run / "config.json").write_text("{}")
    assert "already holds a run" in claim_problem(run, resume=False, overwrite=False)
    assert claim_problem(run, resume=True, overwrite=False) is None
    assert "pass one of them" in claim_problem(run, resume=True, overwrite=True)
    assert claim_problem(run, resume=False, overwrite=True) is None
    assert list(run.iterdir()) == []  # emptied; the directory (holding the run's lock) stays
    run.rmdir()
    run.write_text("a file")
    assert "not a directory" in claim_problem(run, resume=False, overwrite=False)


def test_a_second_run_is_refused_and_the_first_left_intact(shards_dir, tmp_path, capsys) -> None:
    run = tmp_path / "run"
    assert main(tiny_run(shards_dir, run)) == 0
    config = (run / "config.json").read_bytes()
    steps = committed_steps(run)
    capsys.readouterr()

    assert main(tiny_run(shards_dir, run, "--seed", "99")) == 2
    err = capsys.readouterr().err.strip()
    assert "already holds a run" in err and "--overwrite" in err and "\n" not in err
    assert (run / "config.json").read_bytes() == config and committed_steps(run) == steps

    assert main(tiny_run(shards_dir, run, "--seed", "99", "--overwrite")) == 0
    assert '"seed": 99' in (run / "config.json").read_text()

    missing = tmp_path / "missing"
    assert main(tiny_run(shards_dir, missing, "--resume")) == 2
    assert "no run to resume" in capsys.readouterr().err
    assert not missing.exists()
