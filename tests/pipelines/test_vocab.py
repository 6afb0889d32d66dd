"""The vocab pipeline: its transforms under TestPipeline, and whole runs on the DirectRunner."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from transformers import AutoTokenizer

from clozeworks.corpus.vocab.sample import SampleRates
from clozeworks.corpus.vocab.train import VocabConfig, load_tokenizer
from clozeworks.pipelines.plumbing.runner import LocalRunner
from clozeworks.pipelines.vocab import (
    HELDOUT,
    CountChars,
    SampleForVocab,
    VocabRunConfig,
    run_vocab,
)
from clozeworks.schemas.errors import BadInputError, UsageError


def _texts(table: pa.Table) -> list[str]:
    return table.column("text").to_pylist()


def test_sample_for_vocab_splits_by_seed_and_keeps_documents_whole() -> None:
    ids = [f"d{i}" for i in range(200)]
    texts = [f"text number {i}\nsecond line" for i in range(200)]
    rates = SampleRates(seed=3, train=0.5, heldout=0.2)
    train, held = rates.masks(ids)
    expected_train = [t for t, m in zip(texts, train, strict=True) if m]
    expected_held = [t for t, m in zip(texts, held, strict=True) if m]
    with TestPipeline(runner=LocalRunner()) as p:
        tables = p | beam.Create([pa.table({"id": ids, "text": texts})])
        parts = tables | SampleForVocab(rates)
        train_texts = parts.sample | "TrainTexts" >> beam.Map(_texts)
        held_texts = parts[HELDOUT] | "HeldOutTexts" >> beam.Map(_texts)
        assert_that(train_texts, equal_to([expected_train]), label="CheckTrain")
        assert_that(held_texts, equal_to([expected_held]), label="CheckHeldOut")


def test_count_chars_sums_over_all_texts() -> None:
    texts = ["abc", "aé", "", "🤗a\n"]
    with TestPipeline(runner=LocalRunner()) as p:
        tables = p | beam.Create([pa.table({"text": texts[:2]}), pa.table({"text": texts[2:]})])
        assert_that(tables | CountChars(), equal_to([dict(Counter("".join(texts)))]))


def _vocab(docs: str, out: Path, kind: str, argv: tuple[str, ...] = (), **kw) -> dict:
    vocab = VocabConfig(kind=kind, vocab_size=700)
    config = VocabRunConfig(input=docs, output=str(out), vocab=vocab, **kw)
    return run_vocab(config, list(argv))


def test_one_and_two_workers_give_a_byte_identical_tokenizer(small_build, tmp_path) -> None:
    docs = small_build[0].docs
    stats = _vocab(docs, tmp_path / "one", "wordpiece")
    argv = ("--direct_num_workers=2", "--direct_running_mode=multi_processing")
    _vocab(docs, tmp_path / "two", "wordpiece", argv)
    one = (tmp_path / "one" / "tokenizer.json").read_bytes()
    assert one == (tmp_path / "two" / "tokenizer.json").read_bytes()
    store = stats["sample"]["store_documents"]
    assert stats["sample"]["documents"] + stats["heldout"]["documents"] == store
    assert stats["heldout"]["documents"] == pytest.approx(0.05 * store, abs=25)  # 4 sd
    saved = json.loads((tmp_path / "one" / "vocab_stats.json").read_text())
    assert set(stats.pop("seconds")) == {"sample", "train", "measure", "write"}
    assert saved == stats and 0.0 <= saved["heldout"]["unk_rate"] < 0.01
    assert 1.0 < saved["heldout"]["tokens_per_word"] < 3.0
    assert not [p for p in os.listdir(tmp_path / "one") if p.startswith(".")]  # no staging


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_one_and_two_processes_agree_for_every_kind(small_build, tmp_path, kind) -> None:
    docs = small_build[0].docs
    _vocab(docs, tmp_path / "one", kind)
    argv = ("--direct_num_workers=2", "--direct_running_mode=multi_processing")
    _vocab(docs, tmp_path / "two", kind, argv)
    one = (tmp_path / "one" / "tokenizer.json").read_bytes()
    assert one == (tmp_path / "two" / "tokenizer.json").read_bytes()


def test_sample_docs_and_seed_choose_the_sample(small_build, tmp_path) -> None:
    docs = small_build[0].docs
    a = _vocab(docs, tmp_path / "a", "bpe", sample_docs=200, seed=1)
    assert a["sample"]["documents"] == pytest.approx(200, abs=45)  # binomial, 4 sd
    b = _vocab(docs, tmp_path / "b", "bpe", sample_docs=200, seed=2)
    assert a["sample"]["documents"] != b["sample"]["documents"] or (
        (tmp_path / "a" / "tokenizer.json").read_bytes()
        != (tmp_path / "b" / "tokenizer.json").read_bytes()
    )
    with pytest.raises(BadInputError, match="the sample is empty"):
        _vocab(docs, tmp_path / "c", "bpe", sample_bytes=1)
    assert not (tmp_path / "c").exists()  # a failed run leaves nothing behind


def test_remote_runner_needs_a_shared_output(small_build, tmp_path) -> None:
    with pytest.raises(UsageError, match="shared filesystem"):
        _vocab(small_build[0].docs, tmp_path / "x", "bpe", ("--runner=DataflowRunner",))


def test_runs_on_a_bucket(small_build, tmp_path) -> None:
    """Input and output on moto's S3 server, where no path opens with `open()` or `os`: the
    tokenizer written there is the local run's, and transformers loads it."""
    pytest.importorskip("moto.server")
    import boto3
    import fsspec

    from tests.trainer.data.servers import s3_flags, s3_server, upload

    with s3_server() as endpoint:
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="vocab")
        upload(Path(small_build[0].docs), "s3://vocab/docs")
        flags = tuple(s3_flags(endpoint))
        stats = _vocab("s3://vocab/docs", "s3://vocab/tok", "unigram", flags)
        out = tmp_path / "from-the-bucket"
        fs = fsspec.filesystem("s3")
        fs.invalidate_cache()
        fs.get("vocab/tok/", str(out), recursive=True)
    local = _vocab(small_build[0].docs, tmp_path / "local", "unigram")
    assert (out / "tokenizer.json").read_bytes() == (
        tmp_path / "local" / "tokenizer.json"
    ).read_bytes()
    assert stats["heldout"]["tokens"] == local["heldout"]["tokens"]
    assert sorted(os.listdir(out)) == sorted(os.listdir(tmp_path / "local"))
    info = load_tokenizer(out)
    hf = AutoTokenizer.from_pretrained(str(out))
    assert hf("a test sentence")["input_ids"] == info.tokenizer.encode("a test sentence").ids


def test_the_vocabulary_ships_token_counts_of_its_held_out_sample(tokenizer_dir) -> None:
    import json

    counts = json.loads((tokenizer_dir / "token_counts.json").read_text())
    stats = json.loads((tokenizer_dir / "vocab_stats.json").read_text())
    assert len(counts["counts"]) == stats["vocab_size"]
    assert sum(counts["counts"]) == counts["tokens"] == stats["heldout"]["tokens"] > 0
    assert counts["documents"] == stats["heldout"]["documents"]
