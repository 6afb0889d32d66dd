"""One dict per sequence, read back against webdataset itself, and into HF datasets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import webdataset as wds

from clozeworks.corpus.shards.sequences import sequences
from clozeworks.corpus.vocab.train import load_tokenizer
from clozeworks.schemas.manifest import read_manifest


def _from_webdataset(directory: Path) -> list[dict]:
    """The same sequences, unpacked by hand from what webdataset decodes."""
    urls = [str(directory / s.name) for s in read_manifest(directory).shards]
    rows = []
    for sample in wds.WebDataset(urls, shardshuffle=False).decode():
        offsets, tokens = sample["offsets.npy"], sample["tokens.npy"]
        mlm = sample["mlm_offsets.npy"]
        for i in range(len(offsets) - 1):
            ids = tokens[offsets[i] : offsets[i + 1]].tolist()
            a = int(sample["segments.npy"][i])
            rows.append(
                {
                    "input_ids": ids,
                    "token_type_ids": [0] * a + [1] * (len(ids) - a),
                    "sentence_label": int(sample["labels.npy"][i]),
                    "masked_positions": sample["mlm_positions.npy"][mlm[i] : mlm[i + 1]].tolist(),
                    "masked_labels": sample["mlm_labels.npy"][mlm[i] : mlm[i + 1]].tolist(),
                }
            )
    return rows


def test_every_sequence_as_webdataset_reads_it(premasked_pairs, tokenizer_dir) -> None:
    rows = list(sequences(premasked_pairs))
    manifest = read_manifest(premasked_pairs)
    assert len(rows) == manifest.sequences > 0
    assert rows == _from_webdataset(premasked_pairs)
    mask = load_tokenizer(tokenizer_dir).special_ids["mask"]
    masked = [r["input_ids"][p] for r in rows for p in r["masked_positions"]]
    assert 0.7 < np.mean(np.array(masked) == mask) < 0.9  # BERT's 80% [MASK], loosely
    # One shard file alone gives that shard's sequences.
    first = premasked_pairs / manifest.shards[0].name
    assert list(sequences(first)) == rows[: manifest.shards[0].sequences]


def test_plain_packed_sequences_have_ids_only(shards_dir) -> None:
    row = next(sequences(shards_dir))
    assert set(row) == {"input_ids"} and all(isinstance(t, int) for t in row["input_ids"])


def test_into_hugging_face_datasets(premasked_pairs, tmp_path) -> None:
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_generator(
        sequences, gen_kwargs={"source": str(premasked_pairs)}, cache_dir=str(tmp_path)
    )
    rows = list(sequences(premasked_pairs))
    assert len(ds) == len(rows)
    assert ds[0] == rows[0] and ds[len(rows) - 1] == rows[-1]
    assert set(ds.column_names) == {
        "input_ids",
        "token_type_ids",
        "sentence_label",
        "masked_positions",
        "masked_labels",
    }
