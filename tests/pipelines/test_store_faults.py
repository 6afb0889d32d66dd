"""Object-store failures that retries cannot fix, through a fault-injecting proxy in front
of moto's S3 server (tests/faultproxy.py): a lock that cannot be read is never taken over,
a bucket that does not exist, an input gone after it was listed and a marker that cannot
be written are each one line, and nothing is left at the final names."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clozeworks.cli import main
from tests.conftest import write_jsonl
from tests.faultproxy import FaultProxy

NAME = "faults"


@dataclass
class Store:
    proxy: FaultProxy
    url: str
    flags: tuple[str, ...]

    def objects(self, prefix: str) -> dict[str, bytes]:
        import fsspec

        fs = fsspec.filesystem("s3")
        fs.invalidate_cache()
        root = f"{NAME}/{prefix}"
        return {p[len(root) + 1 :]: fs.cat_file(p) for p in fs.find(root)}


@pytest.fixture
def store() -> Iterator[Store]:
    pytest.importorskip("moto.server")
    import boto3

    from tests.trainer.data.servers import _environment, _forget_s3_clients, s3_flags, s3_server

    with s3_server() as endpoint:
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=NAME)
        with FaultProxy(endpoint) as proxy, _environment({"AWS_ENDPOINT_URL_S3": proxy.url}):
            _forget_s3_clients()
            yield Store(proxy, f"s3://{NAME}", tuple(s3_flags(proxy.url)))
        _forget_s3_clients()


def _raw(tmp_path: Path) -> Path:
    write_jsonl(
        tmp_path / "raw" / "a.jsonl", [{"text": f"Document number {i}."} for i in range(20)]
    )
    return tmp_path / "raw"


def _clean(raw: str, out: str, store: Store, capsys) -> tuple[int, list[str]]:
    argv = ["clean", "--input", raw, "--output", out, "--no-progress", *store.flags]
    code = main(argv)
    return code, capsys.readouterr().err.strip().splitlines()


def test_a_lock_that_cannot_be_read_is_not_taken_over(store, tmp_path, capsys, monkeypatch) -> None:
    """GETs of another host's lock keep failing: the run is refused within the lock's time
    bound (Beam's S3 reader alone would retry for ten minutes), the lock left as it was."""
    from clozeworks.corpus.locks import LOCK_FILE, LOCK_SECONDS_VARIABLE, Holder

    monkeypatch.setenv(LOCK_SECONDS_VARIABLE, "3")

    other = Holder(host="elsewhere", pid=1, started="2026-11-28T00:00:00", verb="shard",
                   token="theirs")  # fmt: skip
    lock = f"{NAME}/held/{LOCK_FILE}"
    import fsspec

    fsspec.filesystem("s3").pipe(lock, other.to_bytes())
    store.proxy.fail("GET", rf"/{NAME}/held/\.cloze\.lock", 500)
    start = time.monotonic()
    code, err = _clean(str(_raw(tmp_path)), f"{store.url}/held", store, capsys)
    assert time.monotonic() - start < 30
    assert code == 2 and len(err) == 1, err
    assert f"{store.url}/held/{LOCK_FILE} cannot be read (no answer within 3 s)" in err[0], err
    store.proxy.clear()
    assert store.objects("held") == {LOCK_FILE: other.to_bytes()}


def test_a_bucket_that_does_not_exist_is_one_line(store, tmp_path, capsys) -> None:
    code, err = _clean(str(_raw(tmp_path)), "s3://no-such-bucket/out", store, capsys)
    assert code in (1, 2) and len(err) == 1 and "no-such-bucket" in err[0], err
    assert "Traceback" not in err[0]


def test_an_input_gone_after_listing_is_one_line(store, tmp_path, capsys) -> None:
    import fsspec

    fs = fsspec.filesystem("s3")
    for name in ("a", "b"):
        fs.pipe(f"{NAME}/raw/{name}.jsonl", b'{"text": "A document of some words."}\n' * 5)
    store.proxy.fail("GET", rf"/{NAME}/raw/b\.jsonl", 404)
    code, err = _clean(f"{store.url}/raw", str(tmp_path / "docs"), store, capsys)
    assert code == 2 and len(err) == 1 and f"{store.url}/raw/b.jsonl" in err[0], err
    assert not (tmp_path / "docs" / ".stats.json").exists()


@pytest.fixture
def no_backoff(monkeypatch) -> None:
    """Beam's S3 calls retry seven times over about ten minutes (5 s doubling); the retries
    still happen here, against the proxy's real failures, only without the waits."""
    from apache_beam.utils import retry

    monkeypatch.setattr(retry.Clock, "sleep", lambda self, seconds: None)


def _final_names(store: Store, prefix: str) -> list[str]:
    """What a reader of the output would take for a result: anything not hidden."""
    return sorted(k for k in store.objects(prefix) if not k.split("/")[0].startswith("."))


@pytest.mark.parametrize(
    ("method", "path", "what"),
    [
        # The marker cannot be written beside its place: nothing final has changed yet.
        ("*", rf"/{NAME}/out/\.\.stats\.json\.[0-9a-f]+\.tmp", "marker beside"),
        # It is written beside, but cannot be moved into place: the parts already moved
        # to their final names are taken back.
        ("*", rf"/{NAME}/out/\.stats\.json", "marker"),
        # Every part upload under the staging directory answers 503.
        ("*", rf"/{NAME}/out/\.staging-[^/]+/[^?]*\.parquet", "parts"),
    ],
)
def test_writes_that_keep_failing_are_one_line_and_leave_no_final_names(
    store, tmp_path, capsys, no_backoff, method, path, what
) -> None:
    for verb in ("PUT", "POST") if method == "*" else (method,):
        store.proxy.fail(verb, path, 503)
    code, err = _clean(str(_raw(tmp_path)), f"{store.url}/out", store, capsys)
    assert code == 1 and len(err) == 1, err
    assert f"{store.url}/out" in err[0] and "Traceback" not in err[0], err
    assert "run again later" in err[0], err
    assert any(rule.given for rule in store.proxy.rules), what
    store.proxy.clear()
    assert _final_names(store, "out") == [], store.objects("out")
    assert ".stats.json" not in store.objects("out")
