"""Every verb on an object store (issue 32): moto's S3 server and gcp-storage-emulator on
127.0.0.1 as the buckets, reached through Beam's own S3 and GCS filesystems (the user's flags
and credentials) and fsspec's s3fs and gcsfs. A store there has no directory object, only
objects under a prefix; every file written there must be the bytes a local run writes."""

from __future__ import annotations

import bz2
import hashlib
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from clozeworks.cli import main
from clozeworks.corpus.text.demo import iter_docstrings
from tests.conftest import write_jsonl

NAME = "clozeworks-test"
TINY = (
    "[model]\nhidden_size = 32\nnum_layers = 2\nnum_heads = 2\nintermediate_size = 64\n"
    "[optim]\nwarmup_steps = 1\n"
)
HOLDS = "already holds objects; export to an empty prefix"
TRAIN = ["--objective", "mlm,nsp", "--max-steps", "2", "--batch-size", "4", "--no-progress"]


@dataclass(frozen=True)
class Bucket:
    url: str  # scheme://bucket
    flags: tuple[str, ...]  # what the user passes Beam for this store

    def files(self, prefix: str) -> dict[str, bytes]:
        """Every object under `prefix`, by name below it, through fsspec."""
        import fsspec

        fs, root = fsspec.core.url_to_fs(f"{self.url}/{prefix}")
        fs.invalidate_cache()
        return {p.removeprefix(root + "/"): fs.cat_file(p) for p in fs.find(root)}


def _s3() -> Iterator[Bucket]:
    pytest.importorskip("moto.server")
    import boto3

    from tests.trainer.data.servers import s3_flags, s3_server

    with s3_server() as endpoint:
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=NAME)
        yield Bucket(f"s3://{NAME}", tuple(s3_flags(endpoint)))


def _gcs() -> Iterator[Bucket]:
    pytest.importorskip("gcp_storage_emulator")
    pytest.importorskip("apache_beam.io.gcp.gcsfilesystem")
    # Found, not imported: gcsfs reads the environment gcs_server sets when it is imported.
    if importlib.util.find_spec("gcsfs") is None:
        pytest.skip("gcsfs is not installed")
    from tests.trainer.data.servers import gcs_server

    # Google's clients find the emulator and the credentials in the environment, as they
    # find a user's: no flag differs from a real bucket's.
    with gcs_server(NAME):
        yield Bucket(f"gs://{NAME}", ())


@pytest.fixture(scope="module", params=["s3", "gs"])
def bucket(request) -> Iterator[Bucket]:
    yield from {"s3": _s3, "gs": _gcs}[request.param]()


def _docs(n: int) -> list[str]:
    return [d for _, d in zip(range(n), iter_docstrings(min_chars=80), strict=False)]


CLEAN = ["clean", "--id-field", "id"]
DEDUP = ["dedup", "--near"]
VOCAB = ["vocab", "--vocab-size", "600", "--sample-bytes", "0"]
SHARD = ["shard", "--max-seq-len", "64", "--mode", "nsp"]


def _chain(raw: Path, at: str, flags: list[str], run: Path) -> None:
    """clean -> dedup --near -> vocab -> shard -> train -> export with every path under
    `at` but the raw input and the run directory (local by design: see trainer/publish.py)."""
    assert main([*CLEAN, "--input", str(raw), "--output", f"{at}/clean", *flags]) == 0
    assert main([*DEDUP, "--input", f"{at}/clean", "--output", f"{at}/docs", *flags]) == 0
    assert main([*VOCAB, "--input", f"{at}/docs", "--output", f"{at}/tok", *flags]) == 0
    paths = ["--input", f"{at}/docs", "--tokenizer", f"{at}/tok", "--output", f"{at}/shards"]
    assert main([*SHARD, *paths, *flags]) == 0
    config = run.parent / "tiny.toml"
    config.write_text(TINY, encoding="utf-8")
    train = ["train", "--data", f"{at}/shards", "--output", str(run), "--config", str(config)]
    assert main([*train, *TRAIN]) == 0
    assert main(["export", "--run", str(run), "--output", f"{at}/hf"]) == 0


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Path:
    """The same chain on local disk: the bytes every bucket run must reproduce."""
    root = tmp_path_factory.mktemp("local")
    raw = write_jsonl(root / "raw" / "docs.jsonl", _docs(120))
    _chain(raw.parent, str(root / "work"), [], root / "run")
    return root


def _local_files(directory: Path) -> dict[str, bytes]:
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in directory.rglob("*")
        if p.is_file()
    }


def _comparable(name: str, data: bytes, there: str, here: str) -> bytes:
    """Paths in JSON files and the model card name where the run wrote; the rest must be
    equal."""
    named = name.endswith((".json", "README.md"))
    return data.replace(there.encode(), here.encode()) if named else data


def test_every_verb_on_a_bucket_writes_the_local_bytes(bucket, local, tmp_path, capsys) -> None:
    raw = local / "raw"
    at = f"{bucket.url}/work"
    _chain(raw, at, list(bucket.flags), tmp_path / "run")
    for stage in ("clean", "docs", "tok", "shards", "hf"):
        there = bucket.files(f"work/{stage}")
        here = _local_files(local / "work" / stage)
        assert sorted(there) == sorted(here), stage
        for name, data in there.items():
            digest = hashlib.sha256(_comparable(name, data, at, str(local / "work"))).hexdigest()
            assert digest == hashlib.sha256(here[name]).hexdigest(), f"{stage}/{name}"
    capsys.readouterr()
    assert main(["inspect", f"{at}/shards", "--verify", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["problems"] == []


def test_every_verb_reaches_the_store_through_the_environment_alone(
    bucket, local, tmp_path
) -> None:
    """No Beam flag: the corpus verbs take the endpoint and keys from the same environment
    that train, inspect and export read (AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, ...;
    Google's application default credentials), and write the same bytes."""
    if not bucket.flags:
        pytest.skip("this store's clients read the environment already in the test above")
    at = f"{bucket.url}/env"
    _chain(local / "raw", at, [], tmp_path / "run")
    for stage in ("docs", "tok", "shards"):
        there = bucket.files(f"env/{stage}")
        here = _local_files(local / "work" / stage)
        assert sorted(there) == sorted(here), stage
        for name, data in there.items():
            assert _comparable(name, data, at, str(local / "work")) == here[name], name


def test_an_export_onto_a_prefix_that_holds_objects_is_refused(bucket, local, capsys) -> None:
    # the chain's export is there already (or the other test has not run: write one)
    argv = ["export", "--run", str(local / "run"), "--output", f"{bucket.url}/again"]
    assert main(argv) == 0
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"cloze export: error: {bucket.url}/again: {HOLDS}"


def test_a_missing_store_on_a_bucket_is_one_line(bucket, capsys) -> None:
    argv = ["dedup", "--input", f"{bucket.url}/nothing", "--output", f"{bucket.url}/o"]
    assert main([*argv, *bucket.flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"cloze dedup: error: {bucket.url}/nothing: no such document directory"


def test_build_into_a_bucket_writes_the_local_shards(bucket, tmp_path) -> None:
    raw = write_jsonl(tmp_path / "raw" / "docs.jsonl", _docs(80))
    build = ["build", "--input", str(raw.parent), "--vocab-size", "500", "--max-seq-len", "64"]
    assert main([*build, "--output", f"{bucket.url}/built", *bucket.flags]) == 0
    assert main([*build, "--output", str(tmp_path / "built")]) == 0
    there = bucket.files("built/shards")
    local = _local_files(tmp_path / "built" / "shards")
    assert [n for n in local if n.endswith(".tar")]
    assert {n: d for n, d in there.items() if n.endswith(".tar")} == {
        n: d for n, d in local.items() if n.endswith(".tar")
    }
    # a second build finds every stage current, on the bucket as on disk
    assert main([*build, "--output", f"{bucket.url}/built", *bucket.flags]) == 0


def test_an_output_in_use_on_a_bucket(bucket: Bucket, tmp_path: Path) -> None:
    """A bucket has no locks: the lock is an object with a token. A second run is refused
    naming the first and the object to delete; a run whose token was overwritten by one
    that raced past the first check does not commit; a lock object naming a dead process
    of this host is taken over."""
    from clozeworks.corpus.locks import LOCK_FILE, OutputInUse, OutputLock
    from clozeworks.pipelines.plumbing.beamfs import BEAM_FS
    from clozeworks.pipelines.plumbing.options import pipeline_options

    pipeline_options(list(bucket.flags))
    out = f"{bucket.url}/locked"
    first = OutputLock(BEAM_FS, out, "shard")
    first.acquire()
    with pytest.raises(OutputInUse, match=f"delete {out}/{LOCK_FILE}"):
        OutputLock(BEAM_FS, out, "clean").acquire()
    racer = OutputLock(BEAM_FS, out, "clean")
    BEAM_FS.write_atomic(racer.path, racer.holder.to_bytes())  # as if both passed the check
    racer.held = True
    with pytest.raises(OutputInUse, match="in use by `cloze clean`"):
        first.check()  # the one overwritten never commits
    first.release()
    assert bucket.files("locked")[LOCK_FILE] == racer.holder.to_bytes()  # not removed
    racer.release()
    assert LOCK_FILE not in bucket.files("locked")

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    gone = replace(OutputLock(BEAM_FS, out, "vocab").holder, pid=int(dead.stdout))
    BEAM_FS.write_atomic(f"{out}/{LOCK_FILE}", gone.to_bytes())
    with OutputLock(BEAM_FS, out, "clean") as taker:
        assert bucket.files("locked")[LOCK_FILE] == taker.holder.to_bytes()

    # A lock object that does not parse may be a live run's (another tool's, a newer
    # version's): it is named, never written over.
    BEAM_FS.write_atomic(f"{out}/{LOCK_FILE}", b"not a lock")
    with pytest.raises(OutputInUse, match=f"{out}/{LOCK_FILE} is not a lock this tool wrote"):
        OutputLock(BEAM_FS, out, "clean").acquire()
    assert bucket.files("locked")[LOCK_FILE] == b"not a lock"


def test_meta_several_stores_and_provenance_on_a_bucket(bucket, local, tmp_path) -> None:
    """Issue 34's additions where the stores are objects: `--meta-fields`, a dedup of two
    stores, `shard --provenance` (its table moved into place beside the shards) give the
    bytes they give on local disk."""
    raw = tmp_path / "raw"
    docs = [d["text"] for d in _docs(60)]
    write_jsonl(raw / "a" / "a.jsonl", [{"text": d, "lang": "en"} for d in docs[:40]])
    write_jsonl(raw / "b" / "b.jsonl", [{"text": d, "lang": "de"} for d in docs[30:]])
    tok = str(local / "work" / "tok")

    def steps(at: str, flags: list[str]) -> None:
        for part in ("a", "b"):
            argv = ["clean", "--input", str(raw / part), "--output", f"{at}/{part}"]
            assert main([*argv, "--meta-fields", "lang", "--no-progress", *flags]) == 0
        argv = ["dedup", "--input", f"{at}/a", f"{at}/b", "--output", f"{at}/docs"]
        assert main([*argv, "--no-progress", *flags]) == 0
        argv = ["shard", "--input", f"{at}/docs", "--tokenizer", tok, "--output", f"{at}/sh"]
        assert main([*argv, "--provenance", "--max-seq-len", "64", "--no-progress", *flags]) == 0

    here = tmp_path / "here"
    steps(str(here), [])
    at = f"{bucket.url}/extra"
    steps(at, list(bucket.flags))
    for stage in ("docs", "sh"):
        there = bucket.files(f"extra/{stage}")
        mine = _local_files(here / stage)
        assert sorted(there) == sorted(mine), stage
        for name, data in there.items():
            assert _comparable(name, data, at, str(here)) == mine[name], f"{stage}/{name}"
    assert any(name.startswith(".provenance/") for name in mine)
    stats = json.loads(mine_stats := (here / "docs" / ".stats.json").read_text())
    assert stats["duplicates"] == 10 and len(stats["upstreams"]) == 2, mine_stats


def test_a_wikipedia_dump_and_a_crawl_are_read_from_a_bucket(bucket, tmp_path) -> None:
    """Issue 35's raw forms where they usually lie, on a bucket: a -multistream dump (its bz2
    streams found by seeking through the object) and a gzipped WARC file clean to the bytes
    they clean to from local disk."""
    pytest.importorskip("mwparserfromhell")
    pytest.importorskip("fastwarc")
    import fsspec

    from tests.corpus.text.test_web import CRAWL, write_warc
    from tests.corpus.text.test_wiki import ADA, _page

    raw = tmp_path / "raw"
    raw.mkdir()
    pages = [_page(i, f"Page {i}", f"{ADA}\n\nPage {i} of the dump.") for i in range(1, 40)]
    streams = ["<mediawiki><siteinfo/>\n", *["".join(pages[k : k + 5]) for k in range(0, 39, 5)]]
    multistream = b"".join(bz2.compress(s.encode()) for s in [*streams, "</mediawiki>\n"])
    (raw / "enwiki-x-pages-articles-multistream.xml.bz2").write_bytes(multistream)
    write_warc(raw / "CC-MAIN-1.warc.gz", CRAWL)
    for path in raw.iterdir():
        with fsspec.open(f"{bucket.url}/raw35/raw/{path.name}", "wb") as f:
            f.write(path.read_bytes())
    argv = ["clean", "--no-progress"]
    assert main([*argv, "--input", str(raw), "--output", str(tmp_path / "here")]) == 0
    at = f"{bucket.url}/raw35/docs"
    there_in = f"{bucket.url}/raw35/raw"
    assert main([*argv, "--input", there_in, "--output", at, *bucket.flags]) == 0
    there, mine = bucket.files("raw35/docs"), _local_files(tmp_path / "here")
    assert sorted(there) == sorted(mine)
    for name, data in there.items():
        assert _comparable(name, data, there_in, str(raw)) == mine[name], name
    stats = json.loads(mine[".stats.json"])
    assert stats["documents_out"] == 39 + 2, stats  # the articles and two HTML pages
