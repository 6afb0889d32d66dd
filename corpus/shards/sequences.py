"""One dict per sequence: the shard format unpacked for other tools.

A webdataset sample is a block of up to 512 sequences in flat arrays (docs/design.md,
"Shards"); `sequences` yields them one at a time, with plain lists, in shard order:

    from clozeworks.corpus.shards.sequences import sequences
    for seq in sequences("shards/"):
        seq["input_ids"]              # [CLS] ... [SEP] (pre-masked sets: after masking)

Into Hugging Face `datasets` (no copy of the shards is made until the dataset is built):

    from datasets import Dataset
    ds = Dataset.from_generator(sequences, gen_kwargs={"source": "shards/"})
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clozeworks.corpus.shards.blocks import Block, iter_blocks
from clozeworks.corpus.shards.provenance import documents_of, read_provenance
from clozeworks.schemas.manifest import read_manifest
from clozeworks.schemas.sidecars import MANIFEST_FILE, local


def sequences(source: str | Path) -> Iterator[dict[str, Any]]:
    """Every sequence of a shard set (a directory with .manifest.json, shards in the
    manifest's order) or of one shard file, as a dict:

    - `input_ids`: the token ids, `[CLS]` first;
    - pair modes: `token_type_ids` (0 over segment A with its `[SEP]`, 1 after) and
      `sentence_label` (NSP 0 = IsNext, 1 = NotNext; SOP 0 = in order, 1 = swapped; SSO
      0 = next, 1 = previous, 2 = random);
    - pre-masked sets: `masked_positions` and `masked_labels` (the original ids there);
    - sets built with `--provenance`: `documents`, the documents the sequence holds tokens
      of, each `{id, source, meta}` (a shard file alone: their keys, `document_keys`).

    ShardFormatError names the shard and the place when one is damaged.
    """
    path = Path(source)
    table: dict[int, dict[str, Any]] | None = None
    if path.is_dir() and local(path, MANIFEST_FILE).is_file():
        files = [path / shard.name for shard in read_manifest(path).shards]
        table = read_provenance(path)
    else:
        files = [path]
    for file in files:
        for _, block in iter_blocks(file):
            yield from _unpack(block, table)


def _unpack(block: Block, table: dict[int, dict[str, Any]] | None) -> Iterator[dict[str, Any]]:
    held: list[list[Any]] | None = None
    if block.docs is not None and block.doc_offsets is not None:
        if table:
            held = list(documents_of(block.docs, block.doc_offsets, table))
        else:
            o = block.doc_offsets
            held = [[int(k) for k in block.docs[o[i] : o[i + 1]]] for i in range(len(block))]
    for i in range(len(block)):
        ids = block.sequence(i)
        row: dict[str, Any] = {"input_ids": ids.astype(int).tolist()}
        if block.segments is not None and block.labels is not None:
            a = int(block.segments[i])
            row["token_type_ids"] = [0] * a + [1] * (len(ids) - a)
            row["sentence_label"] = int(block.labels[i])
        if block.mlm_positions is not None:
            positions, labels = block.predictions(i)
            row["masked_positions"] = positions.astype(int).tolist()
            row["masked_labels"] = labels.astype(int).tolist()
        if held is not None:
            row["documents" if table else "document_keys"] = held[i]
        yield row
