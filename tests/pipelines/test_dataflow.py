"""The README's Dataflow commands, run as written with `--dry_run True`: each verb's
pipeline is translated into a Dataflow job offline (apache-beam[gcp]'s DataflowRunner) and
the job is read back. The bucket is gcp-storage-emulator on 127.0.0.1, found by Google's
clients through the environment: nothing in the commands but the placeholders changes.
What matters in a job: no path of the launching machine in any step (its workers could not
read it), a worker environment that has this package, and the groupings on Beam's
GroupByKey (the local runner's file shuffle would spill to the launcher's disk)."""

from __future__ import annotations

import base64
import bz2
import contextlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from clozeworks.cli import main
from clozeworks.corpus.text.demo import iter_docstrings
from tests.wheel import ROOT, build_wheel

pytest.importorskip("apache_beam.runners.dataflow.dataflow_runner")
pytest.importorskip("gcp_storage_emulator")

BUCKET = "clozeworks-dataflow"
IMAGE = "us-central1-docker.pkg.dev/clozeworks-test/workers/clozeworks:0.1.0"
PLACES = {"BUCKET": BUCKET, "PROJECT": "clozeworks-test", "REGION": "us-central1", "IMAGE": IMAGE}
BEAM_VERBS = ("clean", "dedup", "vocab", "shard")


def readme_commands() -> tuple[list[list[str]], list[list[str]]]:
    """(the `DATAFLOW=` flag sets, the `cloze` commands) of the README's Dataflow section,
    with the placeholders filled in."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Running on Dataflow", 1)[1].split("\n## ", 1)[0]
    lines = [
        ln.strip()
        for block in re.findall(r"```sh\n(.*?)```", section, re.S)
        for ln in block.splitlines()
    ]
    for placeholder, value in PLACES.items():
        lines = [re.sub(rf"\b{placeholder}\b", value, ln) for ln in lines]
    flags = [
        shlex.split(ln.split("=", 1)[1])[0].split() for ln in lines if ln.startswith("DATAFLOW=")
    ]
    commands = [shlex.split(ln.split("#")[0]) for ln in lines if ln.startswith("cloze ")]
    return flags, commands


def _expand(command: list[str], dataflow: list[str]) -> list[str]:
    out: list[str] = []
    for word in command[1:]:  # without `cloze`
        out += dataflow if word == "$DATAFLOW" else [word]
    return out


@pytest.fixture(scope="module")
def bucket(tmp_path_factory) -> Iterator[Path]:
    """The emulator with the README's inputs on it: raw documents, and the stores the later
    verbs read, made by the same commands on the local runner. Yields a work directory
    holding what the commands name relative to it (the wheel, the requirements file)."""
    if importlib.util.find_spec("gcsfs") is None:
        pytest.skip("gcsfs is not installed")
    from tests.trainer.data.servers import gcs_server

    work = tmp_path_factory.mktemp("launcher")
    shutil.copy(ROOT / "requirements-dataflow.txt", work)
    wheel = build_wheel(tmp_path_factory.mktemp("wheel"))
    (work / "dist").mkdir()
    shutil.copy(wheel, work / "dist")
    with gcs_server(BUCKET):
        import fsspec

        fsspec.filesystem("gs").pipe(f"{BUCKET}/raw/docs.jsonl", _documents().encode())
        _, commands = readme_commands()
        for command in commands:
            if command[1] in ("clean", "dedup", "vocab"):
                assert main([*_expand(command, []), "--no-progress"]) == 0, command
        yield work


def _documents() -> str:
    """JSON lines of documents the README's filters (c4, gopher) keep: plain sentences of
    prose."""
    docstrings = zip(range(2000), iter_docstrings(min_chars=200), strict=False)
    sentences = [s for _, d in docstrings for s in _prose(d["text"])]
    texts = ["\n".join(sentences[i : i + 8]) for i in range(0, len(sentences) - 7, 8)]
    return "".join(json.dumps({"text": t}) + "\n" for t in texts)


def _prose(docstring: str) -> list[str]:
    """The docstring's sentences that read as prose: words of letters, a full stop."""
    return re.findall(r"[A-Z][a-z ,']{30,}[a-z]\.", docstring)


def _job(argv: list[str], job_file: Path, capsys) -> dict:
    assert main([*argv, "--dry_run", "True", "--dataflow_job_file", str(job_file)]) == 0
    out = capsys.readouterr().out
    assert "dry run: DataflowRunner job of" in out and str(job_file) in out
    return json.loads(job_file.read_text())["pipeline"]


def _leaves(pipeline: dict) -> dict[str, dict]:
    transforms = pipeline["components"]["transforms"]
    return {k: t for k, t in transforms.items() if not t.get("subtransforms")}


def _pickled_fns(pipeline: dict) -> list[bytes]:
    """The pickled bytes of every DoFn (compressed, then base64, in the ParDo payload);
    searched as bytes, never unpickled."""
    from apache_beam.portability.api import beam_runner_api_pb2

    found = []
    for t in _leaves(pipeline).values():
        if t.get("spec", {}).get("urn") != "beam:transform:pardo:v1":
            continue
        payload = beam_runner_api_pb2.ParDoPayload.FromString(
            base64.b64decode(t["spec"]["payload"])
        )
        data = payload.do_fn.payload
        with contextlib.suppress(ValueError, OSError, zlib.error):  # not compressed: as it is
            packed = base64.b64decode(data, validate=True)
            # Beam's picklers compress with bz2 (cloudpickle) or zlib (dill)
            data = bz2.decompress(packed) if packed[:3] == b"BZh" else zlib.decompress(packed)
        found.append(data)
    return found


def _local_roots(work: Path) -> list[bytes]:
    """Where a launcher keeps data: its working and temporary directories, and everything
    this test session made (`work.parent`, pytest's base temp). (Functions of
    Beam's that cloudpickle takes by value carry their module's `__file__`, a path in the
    launcher's site-packages: that names code, not data, and is not searched for.)"""
    return [str(p).encode() for p in (work, Path(tempfile.gettempdir()), work.parent)]


@pytest.mark.parametrize("verb", BEAM_VERBS)
def test_the_readme_dataflow_commands_translate_into_jobs(bucket, verb, tmp_path, capsys) -> None:
    flags, commands = readme_commands()
    image_flags, _ = flags
    (command,) = [c for c in commands if c[1] == verb]
    pipeline = _job(_expand(command, image_flags), tmp_path / "job.json", capsys)
    leaves = _leaves(pipeline)
    urns = {t["spec"]["urn"] for t in leaves.values() if "spec" in t}
    if verb != "vocab":  # vocab's sampling pipeline reads and writes, and groups nothing
        assert "beam:transform:group_by_key:v1" in urns
    fns = _pickled_fns(pipeline)
    assert fns and not [f for f in fns if b"_Spill" in f or b"_ReadBucket" in f]
    for root in _local_roots(bucket):
        assert not [f[f.index(root) - 200 : f.index(root) + 200] for f in fns if root in f], root
        steps = json.dumps(leaves).encode()
        assert root not in steps, root
    assert f"gs://{BUCKET}/".encode() in b"".join(fns)
    # a dry run writes nothing and removes nothing: the stores made above are all there
    import fsspec

    fs = fsspec.filesystem("gs")
    fs.invalidate_cache()
    assert fs.exists(f"{BUCKET}/work/tok/tokenizer.json")
    assert fs.exists(f"{BUCKET}/work/docs/.stats.json")
    (environment,) = pipeline["components"]["environments"].values()
    assert environment["urn"] == "beam:env:docker:v1"
    assert IMAGE in base64.b64decode(environment["payload"]).decode()


def test_the_wheel_and_requirements_reach_the_workers(
    bucket, tmp_path, capsys, monkeypatch
) -> None:
    flags, commands = readme_commands()
    (_, wheel_flags) = flags
    (command,) = [c for c in commands if c[1] == "clean"]
    monkeypatch.chdir(bucket)  # the README's relative paths: dist/..., requirements-...
    pipeline = _job(_expand(command, wheel_flags), tmp_path / "job.json", capsys)
    (environment,) = pipeline["components"]["environments"].values()
    staged = {base64.b64decode(d["rolePayload"])[2:].decode() for d in environment["dependencies"]}
    assert "clozeworks-0.1.0-py3-none-any.whl" in staged
    assert "requirements.txt" in staged


def _pins(path: Path) -> dict[str, str]:
    lines = [ln.split("#")[0].strip() for ln in path.read_text().splitlines()]
    return dict(ln.split("==") for ln in lines if "==" in ln)


def test_the_worker_requirements_are_the_launchers() -> None:
    """Every dependency of the package (but Beam, which is the image's) is in
    requirements-dataflow.txt at the version constraints.txt tests, as are the filters'
    and the readers' extras; Dockerfile.dataflow's Beam is the launcher's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=\[ ]", d)[0].lower() for d in project["dependencies"]}
    names |= {
        re.split(r"[<>=\[ ]", d)[0].lower()
        for x in (
            "lang",
            "fasttext",
            "ftfy",
            "wiki",
            "web",
            "cjk",
            "languages",
            "fast",
            "korean",
            "mecab",
            "kiwi",
            "kss",
            "trafilatura",
        )
        for d in project["optional-dependencies"][x]
    }
    workers, tested = _pins(ROOT / "requirements-dataflow.txt"), _pins(ROOT / "constraints.txt")
    assert set(workers) == names - {"apache-beam"}
    assert {n: tested[n] for n in workers} == workers
    # `shard --premask` draws masks on the workers: the same and PyTorch's (torch, numba).
    premask = _pins(ROOT / "requirements-dataflow-premask.txt")
    extra = {
        re.split(r"[<>=\[ ]", d)[0].lower() for d in project["optional-dependencies"]["premask"]
    }
    assert set(premask) == set(workers) | extra | {"llvmlite"}
    assert {n: tested[n] for n in premask} == premask
    docker = (ROOT / "Dockerfile.dataflow").read_text()
    assert re.search(r"^ARG BEAM=(\S+)$", docker, re.M).group(1) == tested["apache-beam"]


def _with_output(command: list[str], output: str) -> list[str]:
    at = command.index("--output")
    return [*command[: at + 1], output, *command[at + 2 :]]


@pytest.mark.parametrize("verb", BEAM_VERBS)
def test_a_dry_run_into_a_new_output_leaves_nothing_and_no_traceback(
    bucket, verb, tmp_path, capsys
) -> None:
    flags, commands = readme_commands()
    (command,) = [c for c in commands if c[1] == verb]
    argv = _with_output(_expand(command, flags[0]), f"gs://{BUCKET}/new/{verb}")
    _job(argv, tmp_path / "job.json", capsys)
    import fsspec

    fs = fsspec.filesystem("gs")
    fs.invalidate_cache()
    assert not fs.exists(f"{BUCKET}/new/{verb}") or not fs.find(f"{BUCKET}/new/{verb}")


@pytest.mark.parametrize("verb", BEAM_VERBS)
def test_a_local_output_is_refused_before_anything_starts(bucket, verb, tmp_path, capsys) -> None:
    """Dataflow's workers would each write to their own disk: the output would be lost."""
    flags, commands = readme_commands()
    (command,) = [c for c in commands if c[1] == verb]
    argv = _with_output(_expand(command, flags[0]), str(tmp_path / "out"))
    assert main([*argv, "--dry_run", "True"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "output" in err and "gs://" in err, err
    assert not (tmp_path / "out").exists()


def test_the_job_file_holds_the_worker_environment(bucket, tmp_path, capsys) -> None:
    """What Beam would submit besides the pipeline: the worker pool with the machines asked
    for, the image, every option; a user reviews it before paying for the job."""
    flags, commands = readme_commands()
    (command,) = [c for c in commands if c[1] == "clean"]
    workers = ["--machine_type", "n2-standard-4", "--num_workers", "3"]
    workers += ["--max_num_workers", "10", "--disk_size_gb", "50"]
    argv = [*_expand(command, flags[0]), *workers]
    _job(argv, tmp_path / "job.json", capsys)
    document = json.loads((tmp_path / "job.json").read_text())
    environment = document["environment"]
    (pool,) = environment["workerPools"]
    assert pool["machineType"] == "n2-standard-4" and pool["numWorkers"] == 3
    assert pool["diskSizeGb"] == 50
    assert pool["autoscalingSettings"]["maxNumWorkers"] == 10
    assert environment["tempStoragePrefix"].endswith(f"/{BUCKET}/tmp")
    options = environment["sdkPipelineOptions"]["options"]
    assert options["project"] == "clozeworks-test" and options["region"] == "us-central1"
    assert IMAGE in json.dumps(environment)


def test_a_local_tokenizer_travels_with_the_job(bucket, tmp_path, capsys) -> None:
    """`shard --tokenizer` on the launching machine: the tokenizer is read there and its
    tokenizer.json goes to the workers inside the job (by value), so no worker needs the
    local directory (its path is in the job only as a recorded setting)."""
    import fsspec

    fs = fsspec.filesystem("gs")
    local = tmp_path / "tok"
    fs.get(f"{BUCKET}/work/tok/", str(local), recursive=True)
    tokenizer = (local / "tokenizer.json").read_bytes()
    flags, commands = readme_commands()
    (command,) = [c for c in commands if c[1] == "shard"]
    argv = _expand(command, flags[0])
    at = argv.index("--tokenizer")
    argv[at + 1] = str(local)
    pipeline = _job(argv, tmp_path / "job.json", capsys)
    assert any(tokenizer[:2000] in f for f in _pickled_fns(pipeline))


def checklist() -> list[tuple[int, list[str]]]:
    """The README's "From one machine to Dataflow": (number, the lines of its ```sh
    blocks) of each step, placeholders filled in."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### From one machine to Dataflow", 1)[1]
    steps: list[tuple[int, list[str]]] = []
    fenced = False
    for line in section.splitlines():
        numbered = re.match(r"(\d+)\. ", line)
        if numbered:
            steps.append((int(numbered[1]), []))
            fenced = False
        elif steps and line and not line.startswith(" "):
            break  # the prose after the list
        elif line.strip().startswith("```"):
            fenced = line.strip() == "```sh"
        elif fenced and line.strip():
            for placeholder, value in PLACES.items():
                line = re.sub(rf"\b{placeholder}\b", value, line)
            steps[-1][1].append(line.strip())
    return steps


# The walk's bucket prefix (the fixture's stores stay as they are) and a model small
# enough to train here; flags after the README's override its preset.
WALK = f"gs://{BUCKET}/walk/"
TINY = ["--set", "model.hidden_size=32", "--set", "model.num_layers=2"]
TINY += ["--set", "model.num_heads=2", "--set", "model.intermediate_size=64"]
TINY += ["--max-steps", "30", "--batch-size", "8", "--save-every", "3", "--keep", "2"]
TINY += ["--warmup", "0.1", "--no-progress", "--report-to", "none", "--deterministic"]


def test_the_checklist_walks_from_one_machine_to_dataflow(
    bucket, tmp_path, capsys, monkeypatch
) -> None:
    """Every command of the checklist, in order: this machine's as written; `gcloud storage
    cp` through fsspec; each Dataflow verb as a dry run whose job is read, then for real on
    the local runner against the emulator; the training killed once it has a checkpoint
    on the bucket (a preempted machine) and resumed by the checklist's next command in a
    new mirror; the export read back from the bucket."""
    import fsspec

    steps = checklist()
    assert [n for n, _ in steps] == list(range(1, len(steps) + 1)) and len(steps) >= 6
    assert all(lines for _, lines in steps), steps
    image_flags, _ = readme_commands()[0]
    for name in ("sample", "raw"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "docs.jsonl").write_text(_documents(), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    fs = fsspec.filesystem("gs")
    walked: list[str] = []
    for _, lines in steps:
        for line in lines:
            words = shlex.split(line.replace(f"gs://{BUCKET}/", WALK))
            fs.invalidate_cache()
            if words[:3] == ["gcloud", "storage", "cp"]:
                assert words[3] == "-r", words
                fs.put(f"{words[4].rstrip('/')}/", words[5].removeprefix("gs://"), recursive=True)
            elif "$DATAFLOW" in words:
                job = tmp_path / f"{words[1]}.json"
                pipeline = _job(_expand(words, image_flags), job, capsys)
                environment = json.loads(job.read_text())["environment"]
                assert environment["workerPools"] and IMAGE in json.dumps(environment)
                steps_json = json.dumps(_leaves(pipeline)).encode()
                assert not [r for r in _local_roots(tmp_path) if r in steps_json], words
                assert main([*_expand(words, []), "--no-progress"]) == 0, words
            elif words[1] == "train":
                _walk_train(words, tmp_path)
            else:
                assert main(words[1:]) == 0, words
            walked.append(words[1] if words[0] == "cloze" else words[0])
    assert walked.count("train") == 2 and walked[-1] == "export"
    fs.invalidate_cache()
    model = f"{WALK.removeprefix('gs://')}models/bert"
    assert {"config.json", "model.safetensors"} <= {p.rsplit("/", 1)[-1] for p in fs.find(model)}
    run = f"{WALK.removeprefix('gs://')}runs/bert"
    assert fs.exists(f"{run}/step-0000030/COMMITTED") and fs.cat_file(f"{run}/resumes.json")


def _walk_train(words: list[str], where: Path) -> None:
    """The first `cloze train` is killed once the bucket holds a committed checkpoint; the
    one with `--resume` runs on another machine (another mirror) to the end."""
    import fsspec

    resume = "--resume" in words
    env = {**os.environ, "CLOZEWORKS_RUN_CACHE": str(where / ("b" if resume else "a"))}
    argv = [sys.executable, "-m", "clozeworks", *words[1:], *TINY]
    if resume:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0 and "(from step" in done.stdout, done.stderr
        return
    first = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    fs = fsspec.filesystem("gs")
    run = words[words.index("--output") + 1].removeprefix("gs://")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and first.poll() is None:
        fs.invalidate_cache()
        if fs.glob(f"{run}/step-*/COMMITTED"):
            break
        time.sleep(0.05)
    if first.poll() is not None:
        raise AssertionError(f"the run ended before it was killed: {first.stderr.read()}")
    first.send_signal(signal.SIGKILL)
    first.wait()


def test_premask_needs_torch_on_the_workers(bucket, tmp_path, capsys, monkeypatch) -> None:
    """`shard --premask` with the README's wheel and requirements-dataflow.txt is refused in
    one line (its workers would have no torch); requirements-dataflow-premask.txt, which
    has it, translates into a job that stages it."""
    flags, commands = readme_commands()
    (_, wheel_flags) = flags
    (command,) = [c for c in commands if c[1] == "shard"]
    shutil.copy(ROOT / "requirements-dataflow-premask.txt", bucket)
    monkeypatch.chdir(bucket)
    argv = [*_expand(command, wheel_flags), "--premask", "token"]
    assert main([*argv, "--dry_run", "True"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "cloze shard: error: --premask needs torch, numba on the workers, which "
        "requirements-dataflow.txt does not install (requirements-dataflow-premask.txt has them)"
    ]
    at = argv.index("requirements-dataflow.txt")
    argv[at] = "requirements-dataflow-premask.txt"
    pipeline = _job(argv, tmp_path / "job.json", capsys)
    (environment,) = pipeline["components"]["environments"].values()
    staged = {base64.b64decode(d["rolePayload"])[2:].decode() for d in environment["dependencies"]}
    assert "requirements.txt" in staged
