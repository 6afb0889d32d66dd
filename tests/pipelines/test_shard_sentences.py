"""Every shard mode holds the documents' own tokens: nothing glued or split by sentence
splitting (issue 38). The documents are real ones of several kinds, and long ones where
sentencex drops whitespace at a chunk's end (tests/corpus/text/real_documents.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clozeworks.corpus.shards.blocks import iter_blocks
from clozeworks.corpus.text.sentences import split_sentences
from clozeworks.corpus.vocab.train import load_tokenizer
from clozeworks.pipelines.shard import ShardConfig, run_shard
from clozeworks.schemas.documents import DOCUMENT
from clozeworks.schemas.kinds import PACKED_MODES, PAIR_MODES
from clozeworks.schemas.manifest import read_manifest
from tests.corpus.text import real_documents

MODES = sorted(PAIR_MODES) + sorted(PACKED_MODES)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[Path, list[str]]:
    """A finished document store of the real documents (English rules for all: the shard
    builder splits with one language)."""
    directory = tmp_path_factory.mktemp("real") / "docs"
    directory.mkdir()
    texts = [text for _, _, text in real_documents.documents()]
    rows = [
        {"id": f"d{i:03d}", "text": t, "source": "real", "meta": "{}"} for i, t in enumerate(texts)
    ]
    pq.write_table(pa.Table.from_pylist(rows, DOCUMENT), directory / "part-00000-of-00001.parquet")
    (directory / ".stats.json").write_text(json.dumps({"documents_out": len(rows)}))
    return directory, texts


@pytest.fixture(scope="module")
def built(store, small_build, tmp_path_factory) -> dict[str, Path]:
    directory, _ = store
    out = tmp_path_factory.mktemp("real-shards")
    for mode in MODES:
        run_shard(
            ShardConfig(
                input=str(directory),
                tokenizer=small_build[0].tokenizer,
                output=str(out / mode),
                mode=mode,
                max_seq_len=64,
            )
        )
    return {mode: out / mode for mode in MODES}


def _segments(directory: Path) -> list[np.ndarray]:
    """The text segments of every sequence: between [CLS] and [SEP], or A and B of a pair."""
    out = []
    for shard in read_manifest(directory).shards:
        for _, block in iter_blocks(directory / shard.name):
            for i in range(len(block)):
                seq = block.sequence(i).astype(np.int64)
                if block.segments is None:
                    out.append(seq[1:-1])
                else:
                    seg = int(block.segments[i])
                    out += [seq[1 : seg - 1], seq[seg:-1]]
    return out


def _counts(arrays) -> Counter[int]:
    counted: Counter[int] = Counter()
    for a in arrays:
        counted.update(np.asarray(a).tolist())
    return counted


@pytest.mark.parametrize("mode", sorted(PACKED_MODES))
def test_packed_modes_hold_each_sentence_and_each_document_encoded_alone(
    mode, built, store, small_build
) -> None:
    tok = load_tokenizer(small_build[0].tokenizer).tokenizer
    _, texts = store
    directory = built[mode]
    got = _counts(_segments(directory))
    sep = read_manifest(directory).special_tokens["sep"]
    whole = _counts(e.ids for e in tok.encode_batch(texts, add_special_tokens=False))
    if mode == "full-sentences":  # one [SEP] between the documents of its stream
        extra = got[sep] - whole[sep]
        assert 0 < extra < len(texts)
        got[sep] -= extra
    assert got == whole  # WordPiece splits at whitespace: whole = sentence by sentence
    if mode != "single":
        sentences = [s for t in texts for s in split_sentences(t)]
        assert len(sentences) > 10 * len(texts)
        by_sentence = _counts(e.ids for e in tok.encode_batch(sentences, add_special_tokens=False))
        assert got == by_sentence


@pytest.mark.parametrize("mode", sorted(PAIR_MODES))
def test_pair_segments_are_runs_of_one_documents_tokens(mode, built, store, small_build) -> None:
    """A pair's segments are a document's consecutive sentences, trimmed at the ends, so
    each is a contiguous run of that document's tokens encoded whole."""
    tok = load_tokenizer(small_build[0].tokenizer).tokenizer
    _, texts = store
    encoded = tok.encode_batch(texts, add_special_tokens=False)
    # ids as characters (supplementary planes, never a surrogate) to search with str
    corpus = "\0".join("".join(chr(0x10000 + i) for i in e.ids) for e in encoded)
    segments = _segments(built[mode])
    assert len(segments) > 200
    for segment in segments:
        assert len(segment) > 0
        assert "".join(chr(0x10000 + int(i)) for i in segment) in corpus
