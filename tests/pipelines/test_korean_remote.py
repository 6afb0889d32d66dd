"""Korean corpora and vocabularies past one machine: a NamuWiki dump read in five byte
ranges, 모두의 말뭉치 and CC-100 files, a vocabulary on MeCab-ko's morphemes (the analyzer
runs on the workers) and one over jamo, on Beam's job server with a separate worker pool,
read from and written to an S3 bucket (moto) whose options reach the workers only through
the pipeline options: the bytes of a local run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clozeworks.pipelines.clean import CleanConfig, run_clean
from tests.corpus.text.test_modu import NEWS
from tests.corpus.text.test_namuwiki import PAGES, _dump
from tests.corpus.vocab.test_morphemes import korean
from tests.pipelines.test_job_server import cloze, job_server  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow
pytest.importorskip("ijson")
pytest.importorskip("mecab")

NAMU = "namuwiki_20210301.json"
STAGES = ("namu", "klue", "tok-klue", "tok-jamo")


def _raw(root: Path) -> dict[str, bytes]:
    """The raw files, by path under the raw root."""
    docs = korean(600, seed=21)
    return {
        NAMU: _dump(PAGES),
        "modu/NIRW1900000001.json": json.dumps(NEWS, ensure_ascii=False).encode(),
        "cc100/ko.txt": ("\n\n".join(" ".join(docs[i : i + 4]) for i in range(0, 600, 4)) + "\n")
        .encode(),
    }  # fmt: skip


def _stages(raw: str, at: str, flags: list[str]) -> None:
    namu = CleanConfig(inputs=[f"{raw}/{NAMU}"], output=f"{at}/namu", language="ko")
    size = len(_dump(PAGES))
    stats = run_clean(CleanConfig(**{**namu.__dict__, "chunk_bytes": -(-size // 5)}), flags)
    assert stats["documents_out"] == 31, stats
    corpora = ["--input", f"{raw}/modu", f"{raw}/cc100", "--format", "cc100/*:cc100"]
    cloze("clean", *corpora, "--output", f"{at}/klue", "--language", "ko", *flags)
    vocab = ["--sample-bytes", "0", "--no-progress"]
    morphemes = ["--vocab-size", "300", "--pre-tokenize", "morphemes"]
    cloze(
        "vocab", *vocab, *morphemes, "--input", f"{at}/klue", "--output", f"{at}/tok-klue", *flags
    )
    jamo = ["--vocab-size", "200", "--hangul", "jamo"]
    cloze("vocab", *vocab, *jamo, "--input", f"{at}/namu", "--output", f"{at}/tok-jamo", *flags)


def test_korean_stages_on_the_job_server_and_a_bucket(job_server, tmp_path) -> None:  # noqa: F811
    pytest.importorskip("moto.server")
    import boto3
    import fsspec

    from tests.trainer.data.servers import s3_flags, s3_server

    raw = _raw(tmp_path)
    for name, data in raw.items():
        (tmp_path / "raw" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "raw" / name).write_bytes(data)
    local = tmp_path / "work"
    _stages(str(tmp_path / "raw"), str(local), [])
    with s3_server() as endpoint:
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="korean")
        fs = fsspec.filesystem("s3")
        for name, data in raw.items():
            fs.pipe_file(f"korean/raw/{name}", data)
        _stages("s3://korean/raw", "s3://korean/work", [*job_server, *s3_flags(endpoint)])
        for stage in STAGES:
            there = {}
            for key in fs.find(f"korean/work/{stage}"):
                data = fs.cat_file(key)
                if key.endswith(".json"):
                    data = data.replace(b"s3://korean/work", str(local).encode())
                    data = data.replace(b"s3://korean/raw", str(tmp_path / "raw").encode())
                there[key.removeprefix(f"korean/work/{stage}/")] = data
            here = {
                p.relative_to(local / stage).as_posix(): p.read_bytes()
                for p in sorted((local / stage).rglob("*"))
                if p.is_file()
            }
            assert there.keys() == here.keys(), stage
            for name in here:
                assert there[name] == here[name], (stage, name)
    klue = json.loads((local / "tok-klue" / "vocab_stats.json").read_text())
    assert klue["pre_tokenize"] == "morphemes:mecab"
    assert json.loads((local / "tok-jamo" / "vocab_stats.json").read_text())["hangul"] == "jamo"
