"""A run kept on a bucket (GCS emulator on 127.0.0.1): `cloze train --output gs://...` is
killed with SIGKILL after some checkpoints, and `--resume` from another working directory
and another mirror (a new machine) ends bit-identical to an uninterrupted local run; the
bucket then holds the final checkpoint, committed, and the whole metrics log.

The trainings run as their own processes (as on a machine that dies), pointed at the
emulator through the environment, as Google's clients find a real bucket."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from clozeworks.trainer.checkpoint import committed_steps

BUCKET = "clozeworks-runs"
STEPS = 30


@pytest.fixture(scope="module")
def gcs() -> Iterator[None]:
    pytest.importorskip("gcp_storage_emulator")
    if importlib.util.find_spec("gcsfs") is None:
        pytest.skip("gcsfs is not installed")
    from tests.trainer.data.servers import gcs_server

    with gcs_server(BUCKET):
        yield


def _train(shards: Path, output: str, where: Path, *extra: str) -> subprocess.Popen[str]:
    where.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CLOZEWORKS_RUN_CACHE": str(where / "mirrors")}
    sizes = ["model.hidden_size=32", "model.num_layers=2", "model.num_heads=2"]
    sizes += ["model.intermediate_size=64"]
    args = [sys.executable, "-m", "clozeworks", "train", "--data", str(shards)]
    args += ["--output", output, "--preset", "bert-tiny", "--max-steps", str(STEPS)]
    args += ["--batch-size", "8", "--save-every", "3", "--keep", "2", "--log-every", "1"]
    args += ["--warmup", "0.1", "--no-progress", "--deterministic", "--report-to", "none"]
    args += [x for s in sizes for x in ("--set", s)]
    return subprocess.Popen(
        [*args, *extra], cwd=where, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def _finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=600)
    return process.returncode, out, err


def _fetch(url: str, where: Path) -> Path:
    """The bucket's run as `--resume` would see it, in a mirror of its own."""
    code = (
        "import sys; from pathlib import Path; from clozeworks.trainer.bucket_run import "
        "BucketRun; BucketRun(sys.argv[1], Path(sys.argv[2])).prepare(True, False)"
    )
    subprocess.run([sys.executable, "-c", code, url, str(where)], check=True, timeout=300)
    return where


def test_a_killed_bucket_run_resumes_elsewhere_bit_identical(gcs, shards_dir, tmp_path) -> None:
    local = tmp_path / "local-run"
    code, _, err = _finish(_train(shards_dir, str(local), tmp_path / "reference"))
    assert code == 0, err

    url = f"gs://{BUCKET}/run"
    first = _train(shards_dir, url, tmp_path / "machine-a")
    mirror = tmp_path / "machine-a" / "mirrors"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and first.poll() is None:
        runs = list(mirror.glob("*")) if mirror.is_dir() else []
        if runs and any(s >= 9 for s in committed_steps(runs[0])):
            break
        time.sleep(0.02)
    assert first.poll() is None, "the run ended before it could be killed"
    first.send_signal(signal.SIGKILL)
    first.wait()

    code, out, err = _finish(_train(shards_dir, url, tmp_path / "machine-b", "--resume"))
    assert code == 0, err
    assert f"run in {url}" in out and "(from step" in out

    fetched = _fetch(url, tmp_path / "fetched")
    assert committed_steps(fetched) == [STEPS]
    ours = load_file(fetched / f"step-{STEPS:07d}" / "model.safetensors")
    theirs = load_file(local / f"step-{STEPS:07d}" / "model.safetensors")
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    logged = [json.loads(x)["step"] for x in (fetched / "metrics.jsonl").read_text().splitlines()]
    assert logged[-1] == STEPS and set(range(1, STEPS + 1)) <= set(logged)
    assert json.loads((fetched / "resumes.json").read_text())


@pytest.fixture(scope="module")
def bucket_run(gcs, shards_dir, tmp_path_factory) -> str:
    """A finished run kept on the bucket (the later tests read it, none changes it)."""
    url = f"gs://{BUCKET}/kinds/run"
    code, _, err = _finish(_train(shards_dir, url, tmp_path_factory.mktemp("train")))
    assert code == 0, err
    return url


def test_a_new_run_into_a_bucket_run_is_refused(bucket_run, shards_dir, tmp_path) -> None:
    code, _, err = _finish(_train(shards_dir, bucket_run, tmp_path / "b"))
    assert code == 2 and "holds a run; pass --resume" in err and err.count("\n") == 1, err
    code, _, err = _finish(_train(shards_dir, f"gs://{BUCKET}/none", tmp_path / "c", "--resume"))
    assert code == 2 and "no run there" in err, err


def _upload(local: Path, url: str) -> None:
    code = (
        "import sys, fsspec; fs, root = fsspec.core.url_to_fs(sys.argv[2]); "
        "fs.put(sys.argv[1].rstrip('/') + '/', root, recursive=True)"
    )
    subprocess.run([sys.executable, "-c", code, str(local), url], check=True, timeout=300)


def _inspect(url: str, cwd: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "clozeworks", "inspect", url, "--json"],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_inspect_reads_every_kind_on_a_bucket(bucket_run, small_build, tmp_path) -> None:
    """A store, a tokenizer, shards, a run and an export (made from the run on the bucket
    into the bucket), each by URL; the report names the URL."""
    paths = small_build[0]
    base = bucket_run.rsplit("/", 1)[0]
    _upload(Path(paths.docs), f"{base}/docs")
    _upload(Path(paths.tokenizer), f"{base}/tokenizer")
    _upload(Path(paths.shards), f"{base}/shards")
    export = [sys.executable, "-m", "clozeworks", "export", "--run", bucket_run]
    subprocess.run([*export, "--output", f"{base}/hf"], check=True, timeout=300)
    kinds = {"docs": "docs", "tokenizer": "tokenizer", "shards": "shards", "run": "run"}
    kinds["hf"] = "transformers"
    for name, kind in kinds.items():
        shown = _inspect(f"{base}/{name}", tmp_path)
        assert shown["kind"] == kind and shown["path"] == f"{base}/{name}", (name, shown)
    assert _inspect(bucket_run, tmp_path)["last_step"] == STEPS


def _files(root: Path) -> dict[Path, bytes]:
    return {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_export_reads_a_run_on_a_bucket(bucket_run, tmp_path) -> None:
    """`cloze export --run gs://...` (a GPU machine's run, exported elsewhere): the same
    files as the export of that run fetched by hand; a step the run pruned is one line
    naming the steps it has."""
    url = bucket_run
    export = [sys.executable, "-m", "clozeworks", "export"]
    by_url = subprocess.run(
        [*export, "--run", url, "--output", str(tmp_path / "by-url")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert by_url.returncode == 0, by_url.stderr
    by_hand = _fetch(url, tmp_path / "hand" / "run")  # the card names the run by its name
    subprocess.run([*export, "--run", str(by_hand), "--output", str(tmp_path / "by-hand")],
                   check=True, timeout=300, capture_output=True)  # fmt: skip
    ours, theirs = _files(tmp_path / "by-url"), _files(tmp_path / "by-hand")
    assert Path("model.safetensors") in ours and ours == theirs
    pruned = subprocess.run(
        [*export, "--run", url, "--step", "3", "--output", str(tmp_path / "pruned")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert pruned.returncode == 2 and not (tmp_path / "pruned").exists()
    assert pruned.stderr.strip().splitlines()[-1] == (
        f"cloze export: error: {url}: no committed step 3 (committed: 27, 30)"
    ), pruned.stderr


def test_a_committed_step_never_reaches_the_bucket_before_its_config(tmp_path) -> None:
    """The first checkpoint's upload, in order: the run's files (config.json among them)
    before the step's files and its COMMITTED, so a machine that dies at any point leaves
    either no committed step or one `--resume` can go on from."""
    from clozeworks.trainer.bucket_run import BucketRun

    mirror = tmp_path / "mirror"
    step = mirror / "step-0000003"
    step.mkdir(parents=True)
    (mirror / "config.json").write_text("{}")
    (mirror / "metrics.jsonl").write_text('{"step": 3}\n')
    (step / "model.safetensors").write_bytes(b"weights")
    (step / "COMMITTED").write_text("{}")
    bucket = BucketRun(f"memory://runs/{tmp_path.name}", mirror)
    sent: list[str] = []
    put = bucket.fs.put_file

    def recording(source: str, target: str) -> None:
        sent.append(target.rsplit(f"{tmp_path.name}/", 1)[-1])
        put(source, target)

    bucket.fs.put_file = recording
    bucket.push_step(step)
    assert sent.index("config.json") < sent.index("step-0000003/COMMITTED"), sent
    assert sent.index("step-0000003/model.safetensors") < sent.index("step-0000003/COMMITTED")
    assert bucket.holds_run() and bucket._committed() == [3]
