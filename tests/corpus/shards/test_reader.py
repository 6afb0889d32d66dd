"""Reading shards against their manifest: damage is named by shard and byte offset, and a
block is only handed out whole."""

import tarfile

import fsspec
import numpy as np
import pytest

from clozeworks.corpus.shards.blocks import ShardFormatError, make_block, write_blocks
from clozeworks.corpus.shards.reader import (
    BlockError,
    ShardReader,
    ShardSpec,
    check_local_size,
    verify_sha256,
)
from clozeworks.schemas.manifest import block_key


def write(tmp_path, blocks=3, per_block=4, pair=True):
    rng = np.random.default_rng(0)
    made = []
    for _ in range(blocks):
        seqs = [rng.integers(5, 900, size=rng.integers(6, 20)) for _ in range(per_block)]
        made.append(
            make_block(
                seqs,
                "uint16",
                segments=[3] * per_block if pair else None,
                labels=[0] * per_block if pair else None,
            )
        )
    info = write_blocks(tmp_path, 7, "uint16", made)
    members = {"tokens", "offsets"} | ({"segments", "labels"} if pair else set())
    spec = ShardSpec(
        name=info.name,
        sequences=info.sequences,
        blocks=info.blocks,
        bytes=info.bytes,
        sha256=info.sha256,
        block_size=per_block,
        token_dtype="uint16",
        vocab_size=1000,
        members=frozenset(members),
    )
    return tmp_path / info.name, spec, made


def read_all(url, spec, verify=False):
    with ShardReader(str(url), spec, verify) as reader:
        return [reader.read(k) for k in range(spec.blocks)]


def test_reads_blocks_and_skips_forward(tmp_path) -> None:
    path, spec, made = write(tmp_path)
    got = read_all(path, spec, verify=True)
    assert [b.tokens.tolist() for b in got] == [b.tokens.tolist() for b in made]
    with ShardReader(str(path), spec) as reader:
        assert reader.read(2).tokens.tolist() == made[2].tokens.tolist()
        with pytest.raises(ValueError, match="behind the reader"):
            reader.read(1)


def members_end(path):
    """Byte offsets where each member's data ends (rounded to the tar's 512-byte records)."""
    with tarfile.open(path) as tar:
        return [(m.name, m.offset_data + -(-m.size // 512) * 512) for m in tar.getmembers()]


def test_truncation_at_a_member_boundary_never_yields_a_partial_block(tmp_path) -> None:
    path, spec, _ = write(tmp_path)
    name, end = members_end(path)[-2]  # the last block loses its last member
    assert name.startswith("000007_000002")
    path.write_bytes(path.read_bytes()[:end])
    with pytest.raises(ShardFormatError, match=r"shard-000007\.tar: byte \d+: file has"):
        check_local_size(str(path), spec)
    # Without the size check (a stream of unknown length): the block is refused whole.
    with ShardReader(f"pipe:cat {path}", spec) as reader:
        reader.read(0), reader.read(1)
        with pytest.raises(
            BlockError, match=r"block 000007_000002 \(byte \d+\): members .*missing \w+"
        ):
            reader.read(2)


def test_a_stream_that_stops_between_blocks_says_how_far_it_got(tmp_path) -> None:
    path, spec, _ = write(tmp_path)
    ends = members_end(path)
    cut = [e for n, e in ends if n.startswith("000007_000000")][-1]
    path.write_bytes(path.read_bytes()[:cut])
    with ShardReader(f"pipe:cat {path}", spec) as reader:
        reader.read(0)
        with pytest.raises(ShardFormatError, match=r"byte \d+: ends after 1 of 3 blocks"):
            reader.read(1)


def test_a_flipped_byte_is_caught(tmp_path) -> None:
    path, spec, _ = write(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40  # inside some member's data: only the checksum sees it
    path.write_bytes(bytes(data))
    with pytest.raises(ShardFormatError, match=r"shard-000007\.tar: bytes 0-\d+: sha256"):
        verify_sha256(str(path), spec)
    data = bytearray(path.read_bytes())
    data[100] ^= 0x01  # the first member's header: tar's own checksum fails
    path.write_bytes(bytes(data))
    with pytest.raises(ShardFormatError, match=r"shard-000007\.tar: byte \d+: "):
        read_all(path, spec)


def test_ids_outside_the_vocabulary_are_refused(tmp_path) -> None:
    path, spec, _ = write(tmp_path)
    small = ShardSpec(**{**spec.__dict__, "vocab_size": 100})
    with pytest.raises(BlockError, match="outside the vocabulary"):
        read_all(path, small)


def test_the_manifests_invariants_are_enforced_on_every_block(tmp_path) -> None:
    # Sequences over max_seq_len once trained silently (or died with IndexError in the
    # position embedding a hundred steps in); empty sequences and labels outside 0..2 too.
    (tmp_path / "long").mkdir()
    path, spec, _ = write(tmp_path / "long")
    short = ShardSpec(**{**spec.__dict__, "max_seq_len": 10})
    with pytest.raises(BlockError, match=r"a sequence of \d+ tokens; .* hold 1\.\.10"):
        read_all(path, short)
    for name, seqs, labels, match in [
        ("empty", [np.arange(5, 9), np.array([], dtype=np.int64)], [0, 0], "a sequence of 0"),
        ("label", [np.arange(5, 9), np.arange(5, 9)], [0, 5], "label outside 0..2"),
    ]:
        block = make_block(seqs, "uint16", segments=[1, 1], labels=labels)
        (tmp_path / name).mkdir()
        info = write_blocks(tmp_path / name, 7, "uint16", [block])
        shard = {k: getattr(info, k) for k in ("name", "sequences", "blocks", "bytes", "sha256")}
        bad = ShardSpec(**{**spec.__dict__, **shard, "block_size": 2})
        with pytest.raises(BlockError, match=match):
            read_all(tmp_path / name / info.name, bad)


def test_a_member_claiming_more_than_a_block_holds_is_refused_unread(tmp_path) -> None:
    _, spec, _ = write(tmp_path)
    header = tarfile.TarInfo(f"{block_key(7, 0)}.tokens.npy")
    header.size = 5 * 10**9  # a damaged size field: tarfile would try to read it all
    forged = tmp_path / "forged" / spec.name
    forged.parent.mkdir()
    data = header.tobuf(tarfile.USTAR_FORMAT)
    forged.write_bytes(data + b"\0" * (spec.bytes - len(data)))  # the size the manifest says
    with pytest.raises(ShardFormatError, match=r"claims 5000000000 bytes; a block holds at most"):
        read_all(forged, spec)


def test_a_failing_command_is_named(tmp_path) -> None:
    _, spec, _ = write(tmp_path)
    with pytest.raises(ShardFormatError, match=r"shard-000007\.tar: byte \d+: "):
        read_all(f"pipe:cat {tmp_path}/missing/shard-000007.tar", spec)


def test_fsspec_urls_are_read(tmp_path) -> None:
    path, spec, made = write(tmp_path)
    with fsspec.open("memory://shards/shard-000007.tar", "wb") as f:
        f.write(path.read_bytes())
    got = read_all("memory://shards/shard-000007.tar", spec, verify=True)
    assert [b.tokens.tolist() for b in got] == [b.tokens.tolist() for b in made]
