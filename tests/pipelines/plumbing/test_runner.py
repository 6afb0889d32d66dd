"""The local runner: Beam's FnApiRunner without the DirectRunner's try at Prism (which
fetches a binary at run time and leaves a directory in the system temp every run)."""

import gzip
import tempfile
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.runners.portability.fn_api_runner import fn_runner

from clozeworks.cli import main
from clozeworks.pipelines.plumbing.options import is_local, pipeline_options
from clozeworks.pipelines.plumbing.runner import LOCAL_RUNNER, run_pipeline
from tests.conftest import write_jsonl


@pytest.mark.parametrize("argv", [[], ["--runner", "DirectRunner"], ["--runner=direct"]])
def test_the_direct_runner_is_the_local_runner(argv) -> None:
    options = pipeline_options(argv)
    assert options.view_as(StandardOptions).runner == LOCAL_RUNNER
    assert is_local(options)


def test_other_runners_are_left_as_named() -> None:
    for runner in ("PrismRunner", "DataflowRunner", "PortableRunner"):
        assert pipeline_options(["--runner", runner]).view_as(StandardOptions).runner == runner


def _double(x: int) -> int:
    return 2 * x


def test_a_pipeline_runs_on_the_fn_api_runner_and_reaches_no_network(monkeypatch) -> None:
    def no_network(*args, **kwargs):
        raise AssertionError(f"a network look-up during a local pipeline: {args[:2]}")

    monkeypatch.setattr("socket.getaddrinfo", no_network)
    with run_pipeline(pipeline_options([])) as p:
        _ = p | beam.Create([1, 2, 3]) | beam.Map(_double)
    assert isinstance(p.result, fn_runner.RunnerResult)


@pytest.fixture
def system_temp(tmp_path, monkeypatch) -> Path:
    temp = tmp_path / "system-temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return temp


def test_a_run_leaves_nothing_in_the_system_temp(tmp_path, system_temp) -> None:
    raw = write_jsonl(tmp_path / "raw" / "a.jsonl", [{"text": f"doc {i} " * 20} for i in range(50)])
    assert (
        main(["clean", "--input", str(raw), "--output", str(tmp_path / "docs"), "--no-progress"])
        == 0
    )
    assert sorted(p.name for p in system_temp.iterdir()) == []


def test_a_failed_run_leaves_nothing_in_the_system_temp(tmp_path, system_temp, capsys) -> None:
    raw = tmp_path / "raw" / "broken.jsonl.gz"
    raw.parent.mkdir()
    whole = gzip.compress(b"".join(b'{"text": "record %d"}\n' % i for i in range(3000)))
    raw.write_bytes(whole[: len(whole) // 2])
    assert main(["clean", "--input", str(raw), "--output", str(tmp_path / "docs")]) == 2
    assert "broken.jsonl.gz" in capsys.readouterr().err
    assert sorted(p.name for p in system_temp.iterdir()) == []
