"""The fastText language backend with a real fastText model: one trained here on a few
sentences (lid.176.bin cannot be fetched offline; it is read the same way). `cloze clean`
keeps and drops by it, with the model on this disk and on an S3 bucket, as workers on
other machines read it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clozeworks.cli import main
from tests.conftest import write_jsonl

fasttext = pytest.importorskip("fasttext")

ENGLISH = [
    "The river runs past the old mill and the children walk along it to school.",
    "We read the letters again in the evening, when the house was quiet.",
    "A small garden grows behind the library, and people sit there at noon.",
    "The train was late, so they waited on the platform and talked about the weather.",
]
KOREAN = [
    "강물은 오래된 방앗간 옆을 흐르고 아이들은 그 길을 따라 학교에 간다.",
    "우리는 저녁에 집이 조용해지면 편지를 다시 읽었다.",
    "도서관 뒤에는 작은 정원이 있어서 사람들이 점심때 그곳에 앉는다.",
    "기차가 늦어서 그들은 승강장에서 기다리며 날씨 이야기를 나누었다.",
]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """A supervised fastText model with lid.176's labels (`__label__en`, ...)."""
    root = tmp_path_factory.mktemp("lid")
    lines = [f"__label__en {s}" for s in ENGLISH] + [f"__label__ko {s}" for s in KOREAN]
    (root / "train.txt").write_text("\n".join(lines * 20) + "\n", encoding="utf-8")
    trained = fasttext.train_supervised(
        str(root / "train.txt"), epoch=30, minn=1, maxn=3, dim=16, seed=1, thread=1, verbose=0
    )
    trained.save_model(str(root / "lid.bin"))
    return root / "lid.bin"


def _raw(tmp_path: Path) -> Path:
    docs = [" ".join(ENGLISH), " ".join(KOREAN), " ".join(reversed(KOREAN))]
    write_jsonl(tmp_path / "raw" / "a.jsonl", [{"text": t} for t in docs])
    return tmp_path / "raw"


def _clean(raw: Path, output: str, model_path: str, *extra: str) -> list[str]:
    return [
        "clean",
        *("--input", str(raw), "--output", output, "--no-progress"),
        *("--filters", "language", "--language-backend", "fasttext"),
        *("--language-model-path", model_path, "--language-languages", "ko", *extra),
    ]


def test_clean_keeps_and_drops_by_a_fasttext_model(model, tmp_path) -> None:
    out = tmp_path / "docs"
    assert main(_clean(_raw(tmp_path), str(out), str(model))) == 0
    stats = json.loads((out / ".stats.json").read_text())
    assert stats["documents_out"] == 2, stats
    assert stats["dropped.language.other_language"] == 1, stats
    assert {code: v["documents"] for code, v in stats["languages"].items()} == {"en": 1, "ko": 2}


def test_a_code_the_model_does_not_know_and_a_file_that_is_no_model_are_one_line(
    model, tmp_path, capsys
) -> None:
    raw = _raw(tmp_path)
    argv = _clean(raw, str(tmp_path / "a"), str(model))
    argv[argv.index("ko")] = "de"
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "cloze clean: error: --language-languages: fasttext does not identify de (it knows en, ko)"
    ]
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a model")
    assert main(_clean(raw, str(tmp_path / "b"), str(junk))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"cloze clean: error: {junk}: not a fastText model ({junk} has wrong file format!)"
    ]
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_the_model_on_a_bucket_gives_the_same_output(model, tmp_path) -> None:
    pytest.importorskip("moto.server")
    import boto3

    from tests.trainer.data.servers import s3_server

    raw = _raw(tmp_path)
    here = tmp_path / "here"
    assert main(_clean(raw, str(here), str(model))) == 0
    with s3_server() as endpoint:
        s3 = boto3.client("s3", endpoint_url=endpoint)
        s3.create_bucket(Bucket="models")
        s3.put_object(Bucket="models", Key="lid.bin", Body=model.read_bytes())
        there = tmp_path / "there"
        assert main(_clean(raw, str(there), "s3://models/lid.bin")) == 0
    for name in sorted(p.name for p in here.iterdir() if p.suffix == ".parquet"):
        assert (there / name).read_bytes() == (here / name).read_bytes(), name
    assert json.loads((there / ".stats.json").read_text())["documents_out"] == 2
