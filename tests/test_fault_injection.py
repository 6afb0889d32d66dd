"""Random damage to every reader's input ends in a clean error or a counted skip: never a
traceback, and never a short read that looks complete (issue 14).

Each reader gets a valid file, then one of: a truncation, a flipped bit, a run of random
bytes written over it, or random bytes alone. What it may do: raise the project's error
(BadInputError, SchemaError, ShardFormatError: one line naming the file), count records as
rejected, or read data that is still well-formed (a flipped bit inside plain text is just
other text). What it may not do: raise anything else, or, after a truncation, return less
without saying so.
"""

import bz2
import contextlib
import gzip
import io
import json
import lzma
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clozeworks.corpus.shards.blocks import ShardFormatError, make_block, write_blocks
from clozeworks.corpus.shards.npy import load_npy, load_npy_readonly
from clozeworks.corpus.shards.reader import ShardReader, ShardSpec
from clozeworks.corpus.text.readers import ReadOptions, ReadTask, Rejected
from clozeworks.pipelines.read_raw import read_records
from clozeworks.schemas.errors import BadInputError, SchemaError
from clozeworks.schemas.manifest import Manifest
from clozeworks.trainer.checkpoint import intact_problem

RECORDS = [{"text": f"document {i}: " + "some words of text " * (i % 7 + 1)} for i in range(300)]
JSONL = "".join(json.dumps(r) + "\n" for r in RECORDS).encode()
COMPRESS = {
    "": bytes,
    ".gz": gzip.compress,
    ".zst": zstandard.ZstdCompressor().compress,
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
}
EXAMPLES = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _parquet() -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(RECORDS), buf, row_group_size=50)
    return buf.getvalue()


@st.composite
def damage(draw, data: bytes) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(["truncate", "flip", "overwrite", "random"]))
    if kind == "truncate":  # to 1 byte at least: an empty file is an empty file
        return kind, data[: draw(st.integers(1, len(data) - 1))]
    if kind == "flip":
        at, bit = draw(st.integers(0, len(data) - 1)), draw(st.integers(0, 7))
        return kind, data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1 :]
    if kind == "overwrite":
        at = draw(st.integers(0, len(data) - 1))
        junk = draw(st.binary(min_size=1, max_size=64))
        return kind, data[:at] + junk + data[at + len(junk) :]
    return kind, draw(st.binary(max_size=2000))


def read(name: str, data: bytes, fmt: str) -> list:
    task = ReadTask(name, fmt)
    return list(read_records(task, io.BytesIO(data), ReadOptions(max_record_bytes=4096)))


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
@EXAMPLES
@given(data=st.data())
def test_jsonl_in_every_compression(suffix, data) -> None:
    whole = COMPRESS[suffix](JSONL)
    kind, damaged = data.draw(damage(whole))
    try:
        records = read(f"in.jsonl{suffix}", damaged, "jsonl")
    except BadInputError as err:
        assert "in.jsonl" in str(err)
        return
    if kind == "truncate" and suffix:
        pytest.fail(f"a truncated {suffix} file read as {len(records)} records without an error")
    if kind == "truncate":
        # Plain text has no end marker: a cut may only lose records whole or reject the cut
        # line, and every record that was read is counted.
        assert all(isinstance(r, Rejected) or r.text for r in records)


@EXAMPLES
@given(data=st.data())
def test_txt_blocks(data) -> None:
    whole = b"\n\n".join(r["text"].encode() for r in RECORDS)
    _, damaged = data.draw(damage(whole))
    options = ReadOptions(doc_sep="blank", max_record_bytes=4096)
    task = ReadTask("in.txt", "txt")
    records = list(read_records(task, io.BytesIO(damaged), options))
    assert all(
        r.reason in ("bad_utf8", "empty_text", "too_long")
        for r in records
        if isinstance(r, Rejected)
    )


@pytest.mark.parametrize("suffix", ["", ".gz"])
@EXAMPLES
@given(data=st.data())
def test_parquet(suffix, data) -> None:
    whole = COMPRESS[suffix](_parquet())
    kind, damaged = data.draw(damage(whole))
    try:
        records = read(f"in.parquet{suffix}", damaged, "parquet")
    except BadInputError as err:
        assert "in.parquet" in str(err)
        return
    assert kind != "truncate" or len(records) == 0, "a cut Parquet file read as complete"


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    directory = tmp_path_factory.mktemp("shard")
    rng = np.random.default_rng(0)
    blocks = [
        make_block([rng.integers(5, 900, size=rng.integers(6, 30)) for _ in range(8)], "uint16")
        for _ in range(4)
    ]
    info = write_blocks(directory, 3, "uint16", blocks)
    spec = ShardSpec(
        name=info.name,
        sequences=info.sequences,
        blocks=info.blocks,
        bytes=info.bytes,
        sha256=info.sha256,
        block_size=8,
        token_dtype="uint16",
        vocab_size=1000,
        members=frozenset({"tokens", "offsets"}),
        max_seq_len=64,
    )
    return (directory / info.name).read_bytes(), spec, blocks


@EXAMPLES
@given(data=st.data())
def test_shard_tar(shard, tmp_path_factory, data) -> None:
    whole, spec, blocks = shard
    kind, damaged = data.draw(damage(whole))
    path = tmp_path_factory.mktemp("damaged") / spec.name
    path.write_bytes(damaged)
    # Without a checksum (a remote read checks no size): the reader alone must hold.
    remote = f"pipe:cat {path}"
    try:
        with ShardReader(remote, spec, verify=False) as reader:
            got = [reader.read(k) for k in range(spec.blocks)]
    except ShardFormatError as err:
        assert spec.name in str(err)
        return
    assert len(got) == len(blocks)
    if kind == "truncate":  # only a cut in tar's zero padding after the last member is harmless
        assert all(np.array_equal(a.tokens, b.tokens) for a, b in zip(got, blocks, strict=True))
        assert not any(whole[len(damaged) :])
    if damaged != whole:  # a change that still decodes: the checksum catches it
        with pytest.raises(ShardFormatError), ShardReader(str(path), spec, verify=True) as r:
            for k in range(spec.blocks):
                r.read(k)


@EXAMPLES
@given(data=st.data())
def test_npy_header_and_data(data) -> None:
    buf = io.BytesIO()
    np.save(buf, np.arange(200, dtype=np.uint16), allow_pickle=False)
    _, damaged = data.draw(damage(buf.getvalue()))
    for load in (load_npy, load_npy_readonly):
        try:
            array = load(damaged)
        except (ValueError, OSError, EOFError):
            continue
        assert array.nbytes <= len(damaged)  # never more than the bytes could hold


@EXAMPLES
@given(data=st.data())
def test_manifest(data) -> None:
    from tests.schemas.test_manifest import make_manifest

    _, damaged = data.draw(damage(make_manifest().to_json().encode()))
    with contextlib.suppress(SchemaError):
        Manifest.from_json(damaged.decode("utf-8", errors="replace"))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    import torch

    from clozeworks.trainer.checkpoint import save_checkpoint

    run = tmp_path_factory.mktemp("ckpt")
    model = torch.nn.Linear(8, 4)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.ones(2, 8)).sum().backward()
    optimizer.step()
    return save_checkpoint(run, 1, model, optimizer, {"train": {}}, keep=1)


@EXAMPLES
@given(data=st.data(), name=st.sampled_from(["model.safetensors", "optimizer.pt", "state.json"]))
def test_checkpoint_files(checkpoint, tmp_path_factory, data, name) -> None:
    copy = tmp_path_factory.mktemp("copy") / "step"
    shutil.copytree(checkpoint, copy)
    whole = (copy / name).read_bytes()
    _, damaged = data.draw(damage(whole))
    (copy / name).write_bytes(damaged)
    problem = intact_problem(copy)
    assert (problem is None) == (damaged == whole), problem
