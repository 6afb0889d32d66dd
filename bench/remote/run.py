"""Every corpus verb on each place it can run, timed, against the local run's bytes:
local disk, moto's S3 server, gcp-storage-emulator, Beam's job server with an external worker
pool (on disk, and on S3), and the DataflowRunner's dry run. One corpus of real documents
(bench/scale/corpus.py), one run, each verb as its own `python -m clozeworks` process.

    .venv/bin/python bench/remote/run.py [--mb 5]

"identical" compares every file a verb wrote with the local run's (paths in JSON files
replaced); a dry run writes nothing, so it says "n/a". The emulators and the job server
are started here on 127.0.0.1, as the tests start them (tests/trainer/data/servers.py,
tests/pipelines/test_job_server.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.scale.corpus import write_corpus  # noqa: E402
from tests.pipelines.test_job_server import _env, _free_port, _wait_for  # noqa: E402
from tests.trainer.data.servers import gcs_server, s3_flags, s3_server  # noqa: E402

VERBS = ("clean", "dedup", "vocab", "shard")


def commands(raw: str, at: str) -> dict[str, list[str]]:
    return {
        "clean": ["clean", "--input", raw, "--output", f"{at}/clean"],
        "dedup": ["dedup", "--near", "--input", f"{at}/clean", "--output", f"{at}/docs"],
        "vocab": ["vocab", "--input", f"{at}/docs", "--output", f"{at}/tok"],
        "shard": [
            *["shard", "--mode", "nsp", "--input", f"{at}/docs", "--tokenizer", f"{at}/tok"],
            *["--output", f"{at}/shards"],
        ],
    }


def cloze(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "clozeworks", *argv, "--no-progress"],
        env=_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"cloze {' '.join(argv)}:\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def files(listing: dict[str, bytes], there: str, here: str) -> dict[str, bytes]:
    return {
        k: v.replace(there.encode(), here.encode()) if k.endswith(".json") else v
        for k, v in listing.items()
    }


def local_files(directory: Path) -> dict[str, bytes]:
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in directory.rglob("*")
        if p.is_file()
    }


def bucket_files(url: str) -> dict[str, bytes]:
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    fs.invalidate_cache()
    return {p.removeprefix(root + "/"): fs.cat_file(p) for p in fs.find(root)}


@contextlib.contextmanager
def job_server(logs: Path) -> Iterator[list[str]]:
    job, pool = _free_port(), _free_port()
    beam = "apache_beam.runners"
    started = [
        subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdout=(logs / f"{name}.log").open("wb"),
            stderr=subprocess.STDOUT,
            env=_env(),
        )
        for name, module, args in (
            ("job", f"{beam}.portability.local_job_service_main", ["--port", str(job)]),
            ("pool", f"{beam}.worker.worker_pool_main", ["--service_port", str(pool)]),
        )
    ]
    try:
        _wait_for(job, started[0])
        _wait_for(pool, started[1])
        yield [
            "--runner=PortableRunner",
            f"--job_endpoint=127.0.0.1:{job}",
            "--environment_type=EXTERNAL",
            f"--environment_config=127.0.0.1:{pool}",
        ]
    finally:
        for p in started:
            p.terminate()
            p.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=5.0, help="megabytes of text")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-remote-"))
    raw = work / "raw" / "docs.jsonl"
    docs, size = write_corpus(raw, args.mb)
    print(f"corpus: {docs} documents, {size / 1e6:.1f} MB; load average {os.getloadavg()}")
    rows: dict[str, dict[str, tuple[float, str]]] = {}

    def chain(name: str, at: str, flags: list[str], read) -> None:
        rows[name] = {}
        for verb, argv in commands(str(raw.parent), at).items():
            seconds = cloze([*argv, *flags], work)
            if read is None:
                same = "n/a"
            else:
                stage = argv[argv.index("--output") + 1].rsplit("/", 1)[1]
                there = files(read(f"{at}/{stage}"), at, str(work / "local"))
                same = "yes" if there == local_files(work / "local" / stage) else "NO"
            rows[name][verb] = (seconds, same)
            print(f"{name:22} {verb:6} {seconds:6.1f} s  identical: {same}", flush=True)

    chain("local", str(work / "local"), [], lambda d: local_files(Path(d)))
    with s3_server() as endpoint:
        import boto3

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
        flags = s3_flags(endpoint)
        chain("s3 emulator", "s3://bench/work", flags, bucket_files)
        with job_server(work) as portable:
            chain("job server (disk)", str(work / "js"), portable, lambda d: local_files(Path(d)))
            chain("job server (s3)", "s3://bench/js", [*portable, *flags], bucket_files)
    with gcs_server("bench"):
        chain("gcs emulator", "gs://bench/work", [], bucket_files)
        dry = [
            "--runner=DataflowRunner",
            "--dry_run=True",
            "--project=clozeworks-bench",
            "--region=us-central1",
            "--temp_location=gs://bench/tmp",
            "--sdk_container_image=example/clozeworks:0.1.0",
        ]
        chain("dataflow dry run", "gs://bench/work", dry, None)
    print(f"\nload average after: {os.getloadavg()}\n")
    print("| verb | " + " | ".join(rows) + " |")
    print("|---|" + "---|" * len(rows))
    for verb in VERBS:
        cells = [f"{rows[n][verb][0]:.1f} s, {rows[n][verb][1]}" for n in rows]
        print(f"| {verb} | " + " | ".join(cells) + " |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
