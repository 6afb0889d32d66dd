from collections import Counter

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
import webdataset as wds
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from corpus.shardio import iter_blocks
from corpus.tokenize import document_sentences
from corpus.vocab import load_tokenizer
from pipelines.shard import DealToShards, Instance
from schemas.manifest import read_manifest


def _shard_and_size(item):
    _shard, placed = item
    positions = sorted(p for p, _ in placed)
    assert positions == list(range(len(positions)))
    return len(positions)


def test_deal_to_shards_is_balanced() -> None:
    instances = [
        Instance(key=(i * 0x9E3779B97F4A7C15) % (1 << 64), tokens=np.array([i])) for i in range(103)
    ]
    with TestPipeline() as p:
        sizes = (
            p
            | beam.Create(instances)
            | DealToShards(num_shards=None, per_shard=10)
            | beam.Map(_shard_and_size)
        )
        assert_that(sizes, equal_to([10] * 4 + [9] * 7))


def test_shards_hold_every_document_token_once(small_build) -> None:
    paths, manifest = small_build
    shards = paths.shards
    assert read_manifest(shards) == manifest
    sizes = [s.sequences for s in manifest.shards]
    assert max(sizes) - min(sizes) <= 1 and len(sizes) > 1
    info = load_tokenizer(paths.tokenizer)
    sp = info.special_ids
    counted: Counter[int] = Counter()
    for shard in manifest.shards:
        for _, block in iter_blocks(f"{shards}/{shard.name}"):
            for seq in block.sequences():
                assert len(seq) <= manifest.max_seq_len
                assert seq[0] == sp["cls"] and seq[-1] == sp["sep"]
                counted.update(seq[1:-1].tolist())
    expected: Counter[int] = Counter()
    docs = 0
    for f in sorted(__import__("pathlib").Path(paths.docs).glob("part-*.parquet")):
        for text in pq.read_table(f).column("text").to_pylist():
            docs += 1
            for s in document_sentences(info.tokenizer, text):
                expected.update(s.tolist())
    # FULL-SENTENCES puts [SEP] between documents packed together; nothing else is added.
    separators = counted[sp["sep"]] - expected[sp["sep"]]
    counted[sp["sep"]] -= separators
    assert 0 <= separators < docs
    assert counted == expected


def test_webdataset_reads_every_block(small_build) -> None:
    paths, manifest = small_build
    urls = [f"{paths.shards}/{s.name}" for s in manifest.shards]
    samples = list(wds.WebDataset(urls, shardshuffle=False).decode())
    assert len(samples) == sum(s.blocks for s in manifest.shards)
    assert sum(len(s["offsets.npy"]) - 1 for s in samples) == manifest.sequences
