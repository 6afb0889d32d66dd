import io
import subprocess
import tarfile

import numpy as np
import pytest
import webdataset as wds

from clozeworks.corpus.shards.blocks import (
    ShardFormatError,
    ShardWriter,
    TarStream,
    encode_block,
    file_sha256,
    iter_blocks,
    make_block,
    prepare_output_dir,
    write_blocks,
)


def sample_blocks(premasked: bool = False):
    rng = np.random.default_rng(0)
    blocks = []
    for n in (4, 3):
        seqs = [rng.integers(5, 30000, size=rng.integers(3, 20)) for _ in range(n)]
        preds = [(np.array([1, 2]), s[1:3]) for s in seqs] if premasked else None
        blocks.append(
            make_block(
                seqs,
                "uint16",
                segments=[2] * n,
                labels=[0, 1] * (n // 2) + [0] * (n % 2),
                predictions=preds,
            )
        )
    return blocks


def test_round_trip_and_checksum(tmp_path) -> None:
    blocks = sample_blocks(premasked=True)
    info = write_blocks(tmp_path, 3, "uint16", blocks)
    assert info.name == "shard-000003.tar"
    assert (info.sequences, info.blocks) == (7, 2)
    assert info.tokens == sum(b.num_tokens for b in blocks)
    path = tmp_path / info.name
    assert info.bytes == path.stat().st_size and info.sha256 == file_sha256(path)
    read = list(iter_blocks(path))
    assert [k for k, _ in read] == ["000003_000000", "000003_000001"]
    for (_, got), want in zip(read, blocks, strict=True):
        assert got.tokens.dtype == np.uint16
        assert [s.tolist() for s in got.sequences()] == [s.tolist() for s in want.sequences()]
        assert got.labels.tolist() == want.labels.tolist()
        pos, lab = got.predictions(1)
        assert pos.tolist() == [1, 2] and lab.tolist() == want.sequence(1)[1:3].tolist()


def test_webdataset_reads_every_block_and_tar_lists_them(tmp_path) -> None:
    info = write_blocks(tmp_path, 0, "uint16", sample_blocks())
    samples = list(wds.WebDataset(str(tmp_path / info.name), shardshuffle=False).decode())
    assert len(samples) == 2
    assert samples[0]["offsets.npy"][-1] == len(samples[0]["tokens.npy"])
    listing = subprocess.run(
        ["tar", "tf", str(tmp_path / info.name)], capture_output=True, text=True, check=True
    )
    assert "000000_000001.tokens.npy" in listing.stdout.split()


def test_same_blocks_give_identical_bytes(tmp_path) -> None:
    a = (
        write_blocks(tmp_path / "a", 0, "uint16", sample_blocks())
        if (tmp_path / "a").mkdir() is None
        else None
    )
    b = (
        write_blocks(tmp_path / "b", 0, "uint16", sample_blocks())
        if (tmp_path / "b").mkdir() is None
        else None
    )
    assert a is not None and b is not None and a.sha256 == b.sha256


def test_failed_write_leaves_nothing(tmp_path) -> None:
    with pytest.raises(RuntimeError), ShardWriter(tmp_path, 0, "uint16") as writer:
        writer.write(sample_blocks()[0])
        raise RuntimeError("crash mid-shard")
    assert list(tmp_path.iterdir()) == []


def test_truncated_shard_is_named(tmp_path) -> None:
    info = write_blocks(tmp_path, 0, "uint16", sample_blocks())
    path = tmp_path / info.name
    path.write_bytes(path.read_bytes()[:3000])
    with pytest.raises(ShardFormatError, match=r"shard-000000\.tar"):
        list(iter_blocks(path))


def test_inconsistent_block_is_refused(tmp_path) -> None:
    bad = make_block([np.arange(5)], "uint16")
    bad.offsets = np.array([0, 9])
    info = write_blocks(tmp_path, 0, "uint16", [bad])
    with pytest.raises(ShardFormatError, match="block 000000_000000: offsets end at 9"):
        list(iter_blocks(tmp_path / info.name))


def test_pickled_member_is_refused(tmp_path) -> None:
    import io

    buf = io.BytesIO()
    np.save(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    path = tmp_path / "shard-000000.tar"
    with tarfile.open(path, "w") as tar:
        for name, data in (("000000_000000.tokens.npy", buf.getvalue()),):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(ShardFormatError, match="not a valid array"):
        list(iter_blocks(path))


def test_prepare_output_dir_removes_old_manifest_first(tmp_path) -> None:
    (tmp_path / ".manifest.json").write_text("{}")
    (tmp_path / "shard-000009.tar").write_bytes(b"old")
    (tmp_path / ".shard-000001.tar.abc.tmp").write_bytes(b"partial")
    (tmp_path / "notes.txt").write_text("mine")
    prepare_output_dir(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("pairs", [False, True])
def test_bytes_on_disk_within_ten_percent_of_the_token_payload(tmp_path, pairs) -> None:
    """At max length 128 a default shard (8192 sequences, blocks of 512) costs at most 10%
    over the token ids themselves: tar headers and offsets are per block, not per sequence.
    Pair sequences are drawn as long as BERT's filling makes them (most near the target)."""
    rng = np.random.default_rng(1)
    n = 8192
    lengths = np.where(rng.random(n) < 0.1, rng.integers(5, 128, n), rng.integers(110, 129, n))
    seqs = [rng.integers(5, 30000, size=int(k)).astype(np.uint16) for k in lengths]
    blocks = [
        make_block(
            seqs[i : i + 512],
            "uint16",
            segments=rng.integers(3, 60, size=len(seqs[i : i + 512])) if pairs else None,
            labels=rng.integers(0, 2, size=len(seqs[i : i + 512])) if pairs else None,
        )
        for i in range(0, n, 512)
    ]
    info = write_blocks(tmp_path, 0, "uint16", blocks)
    payload = 2 * info.tokens
    assert info.bytes <= 1.10 * payload, info.bytes / payload


def test_tar_stream_writes_what_webdataset_writes() -> None:
    """Our writer skips importing webdataset (and with it torch), not its format."""
    samples = [(f"000001_{i:06d}", encode_block(b)) for i, b in enumerate(sample_blocks(True))]
    ours, theirs = io.BytesIO(), io.BytesIO()
    stream = TarStream(ours)
    writer = wds.TarWriter(theirs, encoder=False, mtime=0, user="", group="")
    for key, members in samples:
        stream.write(key, members)
        writer.write({"__key__": key, **members})
    stream.close()
    writer.close()
    assert ours.getvalue() == theirs.getvalue()
