"""Where shards come from: directories, URLs, lists, brace patterns and pipe: commands,
with the manifest and the tokenizer fingerprint checked."""

import json
import shutil

import fsspec
import pytest
import torch

from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.data.loader import ShardDataset
from tests.trainer.data.shardsets import make_shards, sequence_ids


@pytest.fixture(scope="module")
def shards(tmp_path_factory, tokenizer_dir):
    directory = tmp_path_factory.mktemp("sources")
    make_shards(directory, [24, 24, 24], tokenizer_dir, block_size=8)
    return directory


def epoch(source, **kw):
    ds = ShardDataset(source, batch_size=4, seed=1, **kw)
    return [b for b in ds.loader()]


def same_batches(a, b) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
        for x, y in zip(a, b, strict=True)
    )


def test_a_directory_its_file_url_and_an_fsspec_url_read_the_same(shards) -> None:
    reference = epoch(shards)
    assert same_batches(reference, epoch(f"file://{shards}"))
    for path in shards.rglob("*"):
        if path.is_file():
            with fsspec.open(f"memory://set/{path.relative_to(shards)}", "wb") as f:
                f.write(path.read_bytes())
    assert same_batches(reference, epoch("memory://set", masking=MaskingSettings(kind="token")))
    wwm = epoch("memory://set", masking=MaskingSettings(kind="wwm"))  # tokenizer read remotely
    assert same_batches(epoch(shards, masking=MaskingSettings(kind="wwm")), wwm)


def test_a_list_reads_only_those_shards_with_the_same_masks(shards) -> None:
    listed = [str(shards / "shard-000000.tar"), str(shards / "shard-000002.tar")]
    ids = {i for b in epoch(listed) for i in sequence_ids(b)}
    assert ids and ids <= set(range(24)) | set(range(48, 72))
    braces = epoch(f"{shards}/shard-{{000000..000002}}.tar")
    assert same_batches(braces, epoch(shards))


def test_pipe_commands_find_or_take_a_manifest(shards, tmp_path) -> None:
    cmds = [f"pipe:cat {shards}/shard-00000{i}.tar" for i in range(3)]
    got = epoch(cmds, manifest=shards / ".manifest.json", cache_root=tmp_path / "a")
    assert same_batches(got, epoch(shards))
    # Without manifest=, the command's last shard-NNNNNN.tar becomes .manifest.json.
    braces = f"pipe:cat {shards}/shard-{{000000..000002}}.tar"
    wwm = MaskingSettings(kind="wwm")  # needs the tokenizer, found the same way
    got = epoch(braces, masking=wwm, cache_root=tmp_path / "b")
    assert same_batches(got, epoch(shards, masking=wwm))
    assert len(list((tmp_path / "b").rglob("shard-*.tar"))) == 3  # read from the cache
    with pytest.raises(UsageError, match="manifest="):
        ShardDataset(["pipe:cat /dev/null"], batch_size=4)


def test_bad_lists_are_named(shards) -> None:
    with pytest.raises(BadInputError, match=r"shard-000009\.tar: .*lists no such shard"):
        ShardDataset([str(shards / "shard-000009.tar")], batch_size=4)
    twice = [str(shards / "shard-000001.tar")] * 2
    with pytest.raises(UsageError, match="listed twice"):
        ShardDataset(twice, batch_size=4)
    with pytest.raises(BadInputError, match="no such shard directory"):
        ShardDataset(shards / "nope", batch_size=4)


def test_a_newer_manifest_version_is_refused(tmp_path, shards) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(shards, copy)
    data = json.loads((copy / ".manifest.json").read_text())
    data["version"] = 99
    (copy / ".manifest.json").write_text(json.dumps(data))
    with pytest.raises(BadInputError, match="version 99 is newer"):
        ShardDataset(copy, batch_size=4)


def test_the_tokenizer_must_be_the_one_the_shards_were_encoded_with(
    tmp_path, shards, tokenizer_dir
) -> None:
    ShardDataset(shards, batch_size=4, tokenizer=tokenizer_dir)  # the same one: fine
    other = tmp_path / "other"
    shutil.copytree(tokenizer_dir, other)
    data = json.loads((other / "tokenizer.json").read_text())
    data["added_tokens"][0]["content"] = "[PAD2]"
    (other / "tokenizer.json").write_text(json.dumps(data))
    with pytest.raises(BadInputError, match=r"other/tokenizer\.json: this tokenizer .* is not"):
        ShardDataset(shards, batch_size=4, tokenizer=other)


def test_word_masking_without_a_tokenizer_says_what_to_do(tmp_path, shards) -> None:
    bare = tmp_path / "bare"
    shutil.copytree(shards, bare, ignore=shutil.ignore_patterns(".tokenizer"))
    ShardDataset(bare, batch_size=4)  # token masking needs no word starts
    with pytest.raises(BadInputError, match="pass tokenizer=DIR"):
        ShardDataset(bare, batch_size=4, masking=MaskingSettings(kind="span"))
