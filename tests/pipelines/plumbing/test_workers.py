"""Which runners' workers can reach this machine's files, and the one-line refusal of a
local path when they cannot, for every runner with workers elsewhere (not only Dataflow)."""

from __future__ import annotations

import socket

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from clozeworks.cli import main
from clozeworks.pipelines.plumbing.workers import workers_elsewhere
from tests.conftest import write_jsonl

PORTABLE = ["--runner", "PortableRunner"]
POOL = ["--environment_type", "EXTERNAL", "--environment_config"]
PROCESS = ["--environment_type", "PROCESS"]

CASES = [
    ([], None),
    (["--runner", "DirectRunner"], None),
    (["--runner", "DataflowRunner"], "DataflowRunner's workers"),
    (["--runner", "apache_beam.runners.dataflow.DataflowRunner"], "DataflowRunner's workers"),
    # Beam's default environment is a Docker container, which sees none of this disk.
    ([*PORTABLE, "--job_endpoint", "embed"], "PortableRunner's workers in Docker containers"),
    ([*PORTABLE, "--job_endpoint", "embed", "--environment_type", "LOOPBACK"], None),
    ([*PORTABLE, "--job_endpoint", "localhost:8099", *POOL, "localhost:50000"], None),
    ([*PORTABLE, "--job_endpoint", "127.0.0.1:8099", *POOL, "127.0.0.1:50000"], None),
    ([*PORTABLE, "--job_endpoint", "[::1]:8099", *POOL, "[::1]:50000"], None),
    ([*PORTABLE, *POOL, f"{socket.gethostname()}:50000"], None),
    ([*PORTABLE, *POOL, '{"url": "localhost:50000"}'], None),
    ([*PORTABLE, *POOL, "10.0.0.7:50000"], "the worker pool at 10.0.0.7:50000"),
    (
        [*PORTABLE, *POOL, '{"url": "pool.internal:50000"}'],
        "the worker pool at pool.internal:50000",
    ),
    ([*PORTABLE, "--environment_type", "DOCKER"], "PortableRunner's workers in Docker containers"),
    ([*PORTABLE, "--job_endpoint", "localhost:8099", "--environment_type", "PROCESS"], None),
    (
        [*PORTABLE, "--job_endpoint", "jobs.internal:8099", "--environment_type", "PROCESS"],
        "PortableRunner's workers at jobs.internal:8099",
    ),
    # Flink, Spark and Prism start their workers in the launcher when the cluster is here.
    (["--runner", "FlinkRunner"], None),
    (["--runner", "FlinkRunner", "--flink_master", "[local]"], None),
    (
        ["--runner", "FlinkRunner", "--flink_master", "flink.internal:8081"],
        "FlinkRunner's workers in Docker containers",
    ),
    (
        ["--runner", "FlinkRunner", "--flink_master", "flink.internal:8081", *PROCESS],
        "FlinkRunner's workers at flink.internal:8081",
    ),
    (["--runner", "SparkRunner", "--spark_master_url", "local[4]"], None),
    (
        ["--runner", "SparkRunner", "--spark_master_url", "spark://master:7077"],
        "SparkRunner's workers in Docker containers",
    ),
    (["--runner", "PrismRunner"], None),
]


@pytest.mark.parametrize(("argv", "expected"), CASES, ids=lambda c: " ".join(c) if c else "-")
def test_who_cannot_reach_this_machine(argv, expected) -> None:
    assert workers_elsewhere(PipelineOptions(argv)) == expected


def _raw(tmp_path):
    return write_jsonl(tmp_path / "raw" / "a.jsonl", [{"text": "One line of prose."}]).parent


@pytest.mark.parametrize(
    ("runner", "who"),
    [
        ([*PORTABLE, "--job_endpoint", "embed"], "PortableRunner's workers in Docker containers"),
        ([*PORTABLE, "--job_endpoint", "jobs.internal:8099", *POOL, "10.0.0.7:50000"], None),
    ],
)
def test_a_local_output_is_refused_in_one_line_before_anything_starts(
    runner, who, tmp_path, capsys
) -> None:
    who = who or "the worker pool at 10.0.0.7:50000"
    out = tmp_path / "out"
    argv = ["clean", "--input", str(_raw(tmp_path)), "--output", str(out), *runner]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"cloze clean: error: --output {out} is on this machine, which {who} cannot "
        "reach: it must be on a shared filesystem (gs://, s3://, ...)"
    ]
    assert not out.exists()


@pytest.mark.parametrize("verb", ["clean", "dedup", "vocab", "shard"])
def test_a_local_input_is_refused_when_the_workers_read_it_elsewhere(
    verb, tmp_path, capsys
) -> None:
    raw = _raw(tmp_path)
    source = {"clean": ["--input", str(raw)], "dedup": ["--input", str(raw)]}
    source |= {"vocab": ["--input", str(raw)]}
    source |= {"shard": ["--input", str(raw), "--tokenizer", "gs://bucket/tok"]}
    argv = [verb, *source[verb], "--output", "gs://bucket/out", *PORTABLE, *POOL, "10.0.0.7:1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"cloze {verb}: error: --input {raw} is on this machine, which the worker pool at "
        "10.0.0.7:1 cannot reach: it must be on a shared filesystem (gs://, s3://, ...)"
    ]
