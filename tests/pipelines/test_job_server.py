"""The corpus stages on Beam's portable job server with an external worker pool (issue 32):
`local_job_service_main` and `worker_pool_main` as separate processes on 127.0.0.1, the SDK
workers as processes of the pool talking gRPC, Beam's GroupByKey instead of the local file
shuffle. Each verb runs as a user runs it (`python -m clozeworks`, its own process) and must
write the local runner's bytes, on local disk and on an S3 bucket whose filesystem options
reach the workers only through the pipeline options."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clozeworks.cli import main
from clozeworks.corpus.text.demo import iter_docstrings
from tests.conftest import write_jsonl

# A job whose workers die is never failed by the job server: it waits. Nothing here takes
# a tenth of this.
VERB_TIMEOUT_S = 300


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(port: int, what: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert what.poll() is None, f"{what.args} exited with {what.returncode}"
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.2)
    raise AssertionError(f"{what.args} did not listen on {port}")


def _env() -> dict[str, str]:
    # The pool starts each SDK worker as `python -c ...`, the first python on PATH: it must
    # be this environment's, which has Beam and this package.
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}


@pytest.fixture(scope="module")
def job_server(tmp_path_factory) -> Iterator[list[str]]:
    """The two servers, started and stopped here; yields the flags that send a job to them."""
    logs = tmp_path_factory.mktemp("job-server")
    job_port, pool_port = _free_port(), _free_port()
    beam = "apache_beam.runners"
    commands = {
        "job": [f"{beam}.portability.local_job_service_main", "--port", str(job_port)],
        "pool": [f"{beam}.worker.worker_pool_main", "--service_port", str(pool_port)],
    }
    started = {}
    try:
        for name, (module, *args) in commands.items():
            log = (logs / f"{name}.log").open("wb")
            started[name] = subprocess.Popen(
                [sys.executable, "-m", module, *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_env(),
                cwd=logs,
            )
        _wait_for(job_port, started["job"])
        _wait_for(pool_port, started["pool"])
        yield [
            "--runner=PortableRunner",
            f"--job_endpoint=127.0.0.1:{job_port}",
            "--environment_type=EXTERNAL",
            f"--environment_config=127.0.0.1:{pool_port}",
        ]
    finally:
        for process in started.values():
            process.terminate()
        for process in started.values():
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


def cloze(*argv: str) -> None:
    """One verb in its own process, as a user runs it; the local reference runs in this one."""
    if "--runner=PortableRunner" not in argv:
        assert main(list(argv)) == 0
        return
    done = subprocess.run(
        [sys.executable, "-m", "clozeworks", *argv],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=VERB_TIMEOUT_S,
    )
    assert done.returncode == 0, f"cloze {' '.join(argv)}:\n{done.stderr[-3000:]}"


def _stages(raw: Path, at: str, flags: list[str]) -> None:
    cloze("clean", "--input", str(raw), "--output", f"{at}/clean", "--id-field", "id", *flags)
    cloze("dedup", "--near", "--input", f"{at}/clean", "--output", f"{at}/docs", *flags)
    vocab = ["--vocab-size", "600", "--sample-bytes", "0"]
    cloze("vocab", *vocab, "--input", f"{at}/docs", "--output", f"{at}/tok", *flags)
    paths = ["--input", f"{at}/docs", "--tokenizer", f"{at}/tok", "--output", f"{at}/shards"]
    cloze("shard", "--max-seq-len", "64", "--mode", "nsp", *paths, *flags)


def _files(directory: Path, there: str = "", here: str = "") -> dict[str, bytes]:
    """Every file below `directory`; paths in JSON files rewritten from `there` to `here`."""
    out = {}
    for p in sorted(directory.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if there and p.suffix == ".json":
                data = data.replace(there.encode(), here.encode())
            out[p.relative_to(directory).as_posix()] = data
    return out


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("local")
    docs = [d for _, d in zip(range(120), iter_docstrings(min_chars=80), strict=False)]
    write_jsonl(root / "raw" / "docs.jsonl", docs)
    _stages(root / "raw", str(root / "work"), [])
    return root


STAGES = ("clean", "docs", "tok", "shards")


def test_the_stages_on_the_job_server_write_the_local_bytes(job_server, local, tmp_path) -> None:
    _stages(local / "raw", str(tmp_path / "work"), job_server)
    for stage in STAGES:
        there = _files(tmp_path / "work" / stage, str(tmp_path / "work"), str(local / "work"))
        assert there == _files(local / "work" / stage), stage


def test_the_stages_on_the_job_server_read_and_write_a_bucket(job_server, local) -> None:
    pytest.importorskip("moto.server")
    import boto3
    import fsspec

    from tests.trainer.data.servers import s3_flags, s3_server

    with s3_server() as endpoint:
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="jobs")
        s3 = s3_flags(endpoint)
        # The pool was started before this server: its workers know the endpoint and keys
        # only from the pipeline options.
        _stages(local / "raw", "s3://jobs/work", [*job_server, *s3])
        fs = fsspec.filesystem("s3")
        for stage in STAGES:
            root = f"jobs/work/{stage}"
            there = {}
            for key in fs.find(root):
                data = fs.cat_file(key)
                if key.endswith(".json"):
                    data = data.replace(b"s3://jobs/work", str(local / "work").encode())
                there[key.removeprefix(root + "/")] = data
            assert there == _files(local / "work" / stage), stage
