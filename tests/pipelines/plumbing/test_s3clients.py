"""Beam's S3 filesystem with shared boto3 clients (`plumbing.s3clients`), on moto's S3
server: one client per settings however many operations, files read in turns through
their own streams, and another endpoint asked through a client of its own. (The bytes of
whole pipelines on S3 are tests/pipelines/test_object_store.py's.)"""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("moto.server")
pytest.importorskip("apache_beam.io.aws.s3io")

import boto3
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from clozeworks.pipelines.plumbing import s3clients
from tests.trainer.data.servers import s3_flags, s3_server


def _made(monkeypatch) -> list[str]:
    """The endpoints of the Beam client wrappers made from here on (each a boto3 client)."""
    made: list[str] = []
    original = s3clients.SharedClient.original

    def counting(options):
        client = original(options=options)
        made.append(client.client.meta.endpoint_url)
        return client

    monkeypatch.setattr(s3clients.SharedClient, "original", counting)
    monkeypatch.setattr(s3clients, "_TEMPLATES", {})
    return made


def test_beams_s3io_shares_one_client_per_settings(monkeypatch) -> None:
    assert s3clients.install()  # beamfs installed it already: a second call keeps it
    assert sys.modules["apache_beam.io.aws.s3io"].boto3_client.Client is s3clients.SharedClient
    made = _made(monkeypatch)
    with s3_server() as first, s3_server() as second:
        boto3.client("s3", endpoint_url=first).create_bucket(Bucket="shared")
        FileSystems.set_options(PipelineOptions(s3_flags(first)))
        try:
            texts = {f"s3://shared/{i}.txt": f"file {i} ".encode() * 50_000 for i in range(3)}
            for path, data in texts.items():
                with FileSystems.create(path) as f:
                    f.write(data)
            readers = {path: FileSystems.open(path) for path in texts}
            got = {path: b"" for path in texts}
            while any(len(got[p]) < len(texts[p]) for p in texts):  # in turns, 64 KB each
                for path, reader in readers.items():
                    got[path] += reader.read(1 << 16)
            assert got == texts
            assert FileSystems.exists("s3://shared/0.txt") and not FileSystems.exists(
                "s3://shared/9.txt"
            )
            assert [
                m.path for m in FileSystems.match(["s3://shared/*.txt"])[0].metadata_list
            ] == list(texts)
            assert made == [first]  # dozens of operations, one client
            FileSystems.set_options(PipelineOptions(s3_flags(second)))
            FileSystems.exists("s3://shared/0.txt")  # (moto's servers share one store)
            assert made == [first, second]
        finally:
            FileSystems._pipeline_options = None
