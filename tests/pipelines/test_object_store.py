"""The corpus stages on an object store: moto's S3 server on 127.0.0.1 as the bucket, reached
through Beam's own S3 filesystem with the user's flags (issue 32). A store there has no
directory object, only objects under a prefix; its part files must be the bytes a local
run writes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from clozeworks.cli import main
from clozeworks.corpus.text.demo import iter_docstrings
from tests.conftest import write_jsonl

pytest.importorskip("moto.server")
pytest.importorskip("boto3")

BUCKET = "clozeworks-test"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    from tests.trainer.data.servers import s3_server

    with s3_server() as endpoint:
        import boto3

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        yield endpoint


def _flags(endpoint: str) -> list[str]:
    return [
        f"--s3_endpoint_url={endpoint}",
        "--s3_access_key_id=testing",
        "--s3_secret_access_key=testing",
        "--s3_region_name=us-east-1",
    ]


def _objects(endpoint: str, prefix: str) -> dict[str, str]:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    out = {}
    for item in listed:
        body = client.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read()
        out[item["Key"].removeprefix(prefix)] = hashlib.sha256(body).hexdigest()
    return out


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _local_files(directory: Path) -> dict[str, str]:
    return {p.name: _sha(p) for p in directory.iterdir() if p.is_file()}


def _local(directory: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in directory.iterdir()
        if p.name.startswith("part-")
    }


def test_the_corpus_stages_on_a_bucket_write_the_local_bytes(s3, tmp_path, capsys) -> None:
    docs = [d for _, d in zip(range(120), iter_docstrings(min_chars=80), strict=False)]
    raw = write_jsonl(tmp_path / "raw" / "docs.jsonl", docs)
    flags = _flags(s3)
    clean = ["clean", "--input", str(raw.parent), "--id-field", "id"]
    assert main([*clean, "--output", f"s3://{BUCKET}/work/clean", *flags]) == 0
    assert main([*clean, "--output", str(tmp_path / "clean")]) == 0
    # the store is a prefix, not a directory object: dedup must still find it
    dedup = ["dedup", "--near"]
    remote = [
        *dedup,
        "--input",
        f"s3://{BUCKET}/work/clean",
        "--output",
        f"s3://{BUCKET}/work/docs",
    ]
    assert main([*remote, *flags]) == 0, capsys.readouterr().err
    assert (
        main([*dedup, "--input", str(tmp_path / "clean"), "--output", str(tmp_path / "docs")]) == 0
    )
    for stage in ("clean", "docs"):
        there = _objects(s3, f"work/{stage}/")
        parts = {k: v for k, v in there.items() if k.startswith("part-")}
        assert parts and parts == _local(tmp_path / stage), stage
        assert "stats.json" in there and not [k for k in there if ".staging-" in k]
    stats = json.loads((tmp_path / "docs" / "stats.json").read_text())
    assert stats["documents_in"] == 120
    # vocab and shard read and write the bucket too; the shards are the local run's
    vocab = ["vocab", "--vocab-size", "600", "--sample-bytes", "0"]
    there = f"s3://{BUCKET}/work"
    assert main([*vocab, "--input", f"{there}/docs", "--output", f"{there}/tok", *flags]) == 0
    assert main([*vocab, "--input", str(tmp_path / "docs"), "--output", str(tmp_path / "tok")]) == 0
    assert _objects(s3, "work/tok/")["tokenizer.json"] == _sha(tmp_path / "tok" / "tokenizer.json")
    shard = ["shard", "--max-seq-len", "64", "--mode", "nsp"]
    remote = [
        "--input",
        f"{there}/docs",
        "--tokenizer",
        f"{there}/tok",
        "--output",
        f"{there}/shards",
    ]
    assert main([*shard, *remote, *flags]) == 0, capsys.readouterr().err
    local = ["--input", str(tmp_path / "docs"), "--tokenizer", str(tmp_path / "tok")]
    assert main([*shard, *local, "--output", str(tmp_path / "shards")]) == 0
    shards = _objects(s3, "work/shards/")
    for name, digest in _local_files(tmp_path / "shards").items():
        if name.endswith(".tar"):
            assert shards[name] == digest, name
    capsys.readouterr()
    assert main(["inspect", f"{there}/shards", "--verify", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["problems"] == []


def test_a_missing_store_on_a_bucket_is_one_line(s3, capsys) -> None:
    argv = ["dedup", "--input", f"s3://{BUCKET}/nothing", "--output", f"s3://{BUCKET}/o"]
    assert main([*argv, *_flags(s3)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"cloze dedup: error: s3://{BUCKET}/nothing: no such document directory"


def test_build_into_a_bucket_writes_the_local_shards(s3, tmp_path) -> None:
    docs = [d for _, d in zip(range(80), iter_docstrings(min_chars=80), strict=False)]
    raw = write_jsonl(tmp_path / "raw" / "docs.jsonl", docs)
    build = ["build", "--input", str(raw.parent), "--vocab-size", "500", "--max-seq-len", "64"]
    assert main([*build, "--output", f"s3://{BUCKET}/built", *_flags(s3)]) == 0
    assert main([*build, "--output", str(tmp_path / "built")]) == 0
    there = _objects(s3, "built/shards/")
    local = _local_files(tmp_path / "built" / "shards")
    assert [n for n in local if n.endswith(".tar")]
    assert {n: d for n, d in there.items() if n.endswith(".tar")} == {
        n: d for n, d in local.items() if n.endswith(".tar")
    }
    # a second build finds every stage current, on the bucket as on disk
    assert main([*build, "--output", f"s3://{BUCKET}/built", *_flags(s3)]) == 0
