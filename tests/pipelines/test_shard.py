import subprocess
from collections import Counter
from pathlib import Path

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
import pytest
import webdataset as wds
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from clozeworks.corpus.shards import dealing
from clozeworks.corpus.shards.blocks import iter_blocks
from clozeworks.corpus.shards.instances import SequenceBatch, Specials, pack_stream
from clozeworks.corpus.shards.keys import string_keys
from clozeworks.corpus.shards.recipes import GroupPart, Recipe
from clozeworks.corpus.shards.settings import ShardSettings
from clozeworks.corpus.shards.tokenize import (
    DocumentEncoder,
    TokenizedBatch,
    tokenize_documents,
)
from clozeworks.corpus.vocab.train import load_tokenizer
from clozeworks.pipelines.deal import DealToShards
from clozeworks.pipelines.make_sequences import SequencesFromGroups
from clozeworks.pipelines.plumbing.runner import LocalRunner
from clozeworks.pipelines.shard import ShardConfig, run_shard
from clozeworks.schemas.manifest import read_manifest

BASE = 100000


def _shard_and_size(item):
    _shard, placed = item
    positions = sorted(p for part, _ in placed for p in part.tolist())
    assert positions == list(range(len(positions)))
    return len(positions)


def test_deal_to_shards_is_balanced() -> None:
    keys = [(i * 0x9E3779B97F4A7C15) % (1 << 64) for i in range(103)]
    # three batches, as three DoFn calls would emit them, keyed by 2-bit buckets
    batches = []
    for part in (keys[:40], keys[40:41], keys[41:]):
        batch = SequenceBatch.build(part, [np.array([k % 97]) for k in part], "uint16")
        buckets = dealing.buckets_of(batch.keys, 2)
        batches += [(int(b), batch.take(np.flatnonzero(buckets == b))) for b in set(buckets)]
    with TestPipeline(runner=LocalRunner()) as p:
        sizes = (
            p
            | beam.Create(batches)
            | DealToShards(num_shards=None, per_shard=10)
            | beam.Map(_shard_and_size)
        )
        assert_that(sizes, equal_to([10] * 4 + [9] * 7))


def _synthetic_docs(lo: int, hi: int) -> GroupPart:
    """Documents lo..hi-1 with sentences of random lengths; id = (doc + 1) * BASE + i."""
    rng = np.random.default_rng(5)
    shape = [rng.integers(1, 30, size=int(rng.integers(1, 8))) for _ in range(hi)][lo:]
    ids = [(d + 1) * BASE + np.arange(s.sum()) for d, s in zip(range(lo, hi), shape, strict=True)]
    docs = TokenizedBatch.from_lengths(
        np.concatenate(ids), np.concatenate(shape), np.array([len(s) for s in shape])
    )
    names = [f"doc{d:04d}" for d in range(lo, hi)]
    return GroupPart(names, string_keys(3, names), docs)


def _check_pairs(batches: list[tuple[int, SequenceBatch]]) -> None:
    assert sum(len(b) for _, b in batches) > 300
    for _, batch in batches:
        for i in range(len(batch)):
            _check_pair(batch.sequence(i), int(batch.segments[i]), int(batch.labels[i]))


def _check_pair(t: np.ndarray, seg: int, label: int) -> None:
    assert t[0] == 1 and t[seg - 1] == 2 and t[-1] == 2 and len(t) <= 64
    first, second = t[1 : seg - 1] // BASE, t[seg:-1] // BASE
    assert len(set(first.tolist())) == 1
    if label == 1:
        assert not set(second.tolist()) & set(first.tolist()), "negative from A's document"
    else:
        assert set(second.tolist()) == set(first.tolist())


def test_pair_instances_in_beam_draw_negatives_from_other_documents() -> None:
    shard = ShardSettings(mode="nsp", max_seq_len=64, seed=3)
    settings = Recipe(shard, Specials(cls=1, sep=2), bucket_bits=3)
    # the parts three DoFn calls would emit for two groups
    parts = [(0, _synthetic_docs(0, 150)), (1, _synthetic_docs(150, 300))]
    parts.append((0, _synthetic_docs(300, 400)))
    with TestPipeline(runner=LocalRunner()) as p:
        instances = p | beam.Create(parts) | SequencesFromGroups(settings, "synthetic")
        assert_that(instances, _check_pairs)


def _build(small_build, tmp: Path, mode: str, max_seq_len: int = 64, **kw) -> Path:
    paths, _ = small_build
    out = tmp / mode
    run_shard(
        ShardConfig(
            input=paths.docs,
            tokenizer=paths.tokenizer,
            output=str(out),
            mode=mode,
            max_seq_len=max_seq_len,
            sequences_per_shard=kw.pop("sequences_per_shard", 400),
            **kw,
        )
    )
    return out


@pytest.fixture(scope="module")
def shard_sets(small_build, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("modes")
    return {
        mode: _build(small_build, tmp, mode)
        for mode in ("nsp", "sop", "sso", "doc-sentences", "single")
    }


def _sequences(directory: Path):
    manifest = read_manifest(directory)
    for shard in manifest.shards:
        for _, block in iter_blocks(directory / shard.name):
            for i in range(len(block)):
                seg = None if block.segments is None else int(block.segments[i])
                label = None if block.labels is None else int(block.labels[i])
                yield block.sequence(i), seg, label


def _document_tokens(small_build, split: bool) -> Counter:
    paths, _ = small_build
    tok = load_tokenizer(paths.tokenizer).tokenizer
    texts = [
        t
        for f in sorted(Path(paths.docs).glob("part-*.parquet"))
        for t in pq.read_table(f).column("text").to_pylist()
    ]
    counted: Counter[int] = Counter()
    for doc in tokenize_documents(tok, texts, split=split):
        counted.update(doc.ids.tolist())
    return counted


@pytest.mark.parametrize("mode", ["nsp", "sop", "sso"])
def test_pair_shards_are_well_formed(shard_sets, small_build, mode: str) -> None:
    directory = shard_sets[mode]
    manifest = read_manifest(directory)
    sp = manifest.special_tokens
    labels: Counter[int] = Counter()
    for seq, seg, label in _sequences(directory):
        assert len(seq) <= manifest.max_seq_len
        assert seq[0] == sp["cls"] and seq[seg - 1] == sp["sep"] and seq[-1] == sp["sep"]
        assert 3 <= seg <= len(seq) - 2  # both segments hold at least one token
        assert (seq == sp["cls"]).sum() == 1 and (seq[1:-1] == sp["sep"]).sum() == 1
        labels[label] += 1
    assert sorted(labels) == ([0, 1, 2] if mode == "sso" else [0, 1])
    stats = manifest.stats
    assert stats["pairs.sequences"] == manifest.sequences
    assert all(stats.get(f"pairs.label_{k}", 0) == v for k, v in labels.items())
    # nothing dropped silently: every token of every document is placed or counted as cut
    placed_or_cut = (
        stats["pairs.own_tokens"]
        + stats["pairs.own_tokens_truncated"]
        + stats["pairs.dropped_tokens"]
    )
    assert placed_or_cut == stats["shard.document_tokens"]
    assert stats["pairs.truncated_sequences"] > 0


@pytest.mark.parametrize("mode", ["doc-sentences", "single"])
def test_packed_modes_hold_every_document_token_once(shard_sets, small_build, mode) -> None:
    directory = shard_sets[mode]
    manifest = read_manifest(directory)
    sp = manifest.special_tokens
    counted: Counter[int] = Counter()
    for seq, seg, label in _sequences(directory):
        assert seg is None and label is None and len(seq) <= manifest.max_seq_len
        assert seq[0] == sp["cls"] and seq[-1] == sp["sep"]
        counted.update(seq[1:-1].tolist())
    assert counted == _document_tokens(small_build, split=mode != "single")


def test_shards_hold_every_document_token_once(small_build) -> None:
    """full-sentences (the shared fixture's mode): only [SEP]s between documents are added."""
    paths, manifest = small_build
    sizes = [s.sequences for s in manifest.shards]
    assert max(sizes) - min(sizes) <= 1 and len(sizes) > 1
    sp = manifest.special_tokens
    counted: Counter[int] = Counter()
    for seq, _, _ in _sequences(Path(paths.shards)):
        assert len(seq) <= manifest.max_seq_len
        assert seq[0] == sp["cls"] and seq[-1] == sp["sep"]
        counted.update(seq[1:-1].tolist())
    expected = _document_tokens(small_build, split=True)
    separators = counted[sp["sep"]] - expected[sp["sep"]]
    counted[sp["sep"]] -= separators
    assert 0 <= separators < manifest.stats["shard.documents"]
    assert counted == expected


def test_full_sentences_are_one_stream_of_the_documents_in_key_order(small_build) -> None:
    """Below 2048 documents a store is one group: its shards hold exactly the blocks that
    `pack_stream` (fairseq's `complete`, tests/corpus/shards/test_packing_reference.py)
    cuts from all its documents in document-key order."""
    paths, manifest = small_build
    tables = [pq.read_table(f) for f in sorted(Path(paths.docs).glob("part-*.parquet"))]
    ids = [i for t in tables for i in t.column("id").to_pylist()]
    texts = [x for t in tables for x in t.column("text").to_pylist()]
    info = load_tokenizer(paths.tokenizer)
    encoder = DocumentEncoder(info.tokenizer)
    order = np.argsort(string_keys(manifest.seed, ids), kind="stable")
    docs = encoder.encode(texts).select(order)
    sep = manifest.special_tokens["sep"]
    # Over-long sentences are cut between words, by the vocabulary's word-start table.
    starts_words = np.asarray(info.word_start_table(), dtype=bool)
    stream, starts, ends = pack_stream(docs, manifest.max_seq_len - 2, sep, True, starts_words)
    expected = sorted(tuple(stream[a:b].tolist()) for a, b in zip(starts, ends, strict=True))
    got = sorted(tuple(seq[1:-1].tolist()) for seq, _, _ in _sequences(Path(paths.shards)))
    assert len(got) == manifest.sequences and got == expected


def test_webdataset_reads_every_block_and_tar_lists_them(shard_sets) -> None:
    directory = shard_sets["sso"]
    manifest = read_manifest(directory)
    urls = [str(directory / s.name) for s in manifest.shards]
    samples = list(wds.WebDataset(urls, shardshuffle=False).decode())
    assert len(samples) == sum(s.blocks for s in manifest.shards)
    assert sum(len(s["offsets.npy"]) - 1 for s in samples) == manifest.sequences
    assert sum(len(s["labels.npy"]) for s in samples) == manifest.sequences
    listing = subprocess.run(
        ["tar", "tf", urls[0]], capture_output=True, text=True, check=True
    ).stdout.split()
    assert len(listing) == 4 * manifest.shards[0].blocks  # tokens offsets segments labels


def _checksums(directory: Path) -> list[str]:
    return [s.sha256 for s in read_manifest(directory).shards]


def test_same_seed_same_bytes_and_a_rerun_replaces_cleanly(
    small_build, shard_sets, tmp_path
) -> None:
    again = _build(small_build, tmp_path / "again", "nsp")
    assert _checksums(again) == _checksums(shard_sets["nsp"])
    # rebuild into the same directory with fewer shards: no old shard may survive
    (again / ".shard-000001.tar.deadbeef.tmp").write_bytes(b"partial")
    _build(small_build, tmp_path / "again", "nsp", sequences_per_shard=10_000)
    assert len(read_manifest(again).shards) == 1
    names = sorted(p.name for p in again.iterdir())
    assert names == [".manifest.json", ".tokenizer", "shard-000000.tar"]


@pytest.mark.slow
def test_one_or_two_workers_same_bytes(small_build, shard_sets, tmp_path) -> None:
    paths, _ = small_build
    config = ShardConfig(
        input=paths.docs,
        tokenizer=paths.tokenizer,
        output=str(tmp_path / "two"),
        mode="nsp",
        max_seq_len=64,
        sequences_per_shard=400,
    )
    run_shard(config, ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"])
    assert _checksums(tmp_path / "two") == _checksums(shard_sets["nsp"])
    other = _build(small_build, tmp_path / "seed", "nsp", seed=99)
    assert _checksums(other) != _checksums(shard_sets["nsp"])


def test_premasked_copies_restore_to_the_unmasked_sequences(
    small_build, shard_sets, tmp_path
) -> None:
    masked = _build(small_build, tmp_path, "nsp", premask="wwm", dupe_factor=2)
    manifest = read_manifest(masked)
    assert manifest.premask is not None and manifest.premask.kind == "wwm"
    assert manifest.dupe_factor == 2 and manifest.premask.max_predictions == 10  # 0.15 x 64
    mask_id = manifest.special_tokens["mask"]
    restored: Counter[bytes] = Counter()
    positions: dict[bytes, list[list[int]]] = {}
    for shard in manifest.shards:
        for _, block in iter_blocks(masked / shard.name):
            for i in range(len(block)):
                seq = block.sequence(i).astype(np.int64)
                pos, labels = block.predictions(i)
                assert len(pos) <= 10  # wwm may mask nothing in a pair of one two-piece word
                original = seq.copy()
                original[pos] = labels
                assert (seq[np.setdiff1d(np.arange(len(seq)), pos)] != mask_id).all()
                key = original.tobytes() + bytes([int(block.labels[i]), int(block.segments[i])])
                restored[key] += 1
                positions.setdefault(key, []).append(pos.tolist())
    # copy 0 of every pair is the unmasked build's pair; copy 1 is re-paired, as BERT does
    unmasked: Counter[bytes] = Counter(
        seq.astype(np.int64).tobytes() + bytes([label, seg])
        for seq, seg, label in _sequences(shard_sets["nsp"])
    )
    assert not unmasked - restored
    assert abs(manifest.sequences - 2 * sum(unmasked.values())) < 0.02 * manifest.sequences
    # where both copies hold the same pair, their masks were drawn independently
    twice = [p for p in positions.values() if len(p) == 2]
    assert twice and sum(a == b for a, b in twice) < len(twice) / 2


def test_reference_pair_rules_make_one_sentence_chunks_random_pairs(small_build, tmp_path) -> None:
    # ALBERT's rule: a one-sentence chunk takes B from another document, labelled 1, and is
    # never cut in two; every token is still placed or counted.
    directory = _build(small_build, tmp_path, "sop", pair_rules="reference")
    manifest = read_manifest(directory)
    stats = manifest.stats
    assert manifest.settings["pair_rules"] == "reference"
    assert stats.get("pairs.forced_random", 0) > 0
    assert stats.get("pairs.split_sentences", 0) == 0 and stats.get("pairs.cut_sentences", 0) == 0
    placed_or_cut = stats["pairs.own_tokens"] + stats["pairs.own_tokens_truncated"]
    assert placed_or_cut == stats["shard.document_tokens"]
    assert stats["pairs.random_tokens"] > 0  # sop's negatives are otherwise all swaps
    assert {label for _, _, label in _sequences(directory)} == {0, 1}
