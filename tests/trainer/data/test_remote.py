"""Training from remote shards: a local HTTP server and a local S3-compatible server (moto),
a bounded cache so later epochs do not download again, and dropped connections."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from clozeworks.cli import main
from clozeworks.corpus.shards import cache as shard_cache
from clozeworks.corpus.shards.blocks import ShardFormatError
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.data.loader import ShardDataset
from tests.trainer.data.servers import FileServer, s3_server, upload
from tests.trainer.data.shardsets import make_shards


@pytest.fixture(scope="module")
def served(tmp_path_factory, tokenizer_dir):
    root = tmp_path_factory.mktemp("served")
    make_shards(root / "shards", [40, 40, 40], tokenizer_dir, block_size=8)
    return root


@pytest.fixture(autouse=True)
def no_pause(monkeypatch):
    monkeypatch.setattr(shard_cache, "_PAUSE", 0.0)


def epoch(source, **kw):
    ds = ShardDataset(source, batch_size=4, seed=1, masking=MaskingSettings(kind="wwm"), **kw)
    return list(ds.loader())


def same_batches(a, b) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
        for x, y in zip(a, b, strict=True)
    )


def test_http_shards_are_downloaded_once_and_read_like_local_ones(served, tmp_path) -> None:
    local = epoch(served / "shards")
    with FileServer(served) as server:
        url = f"{server.url}/shards"
        assert same_batches(epoch(url, cache_root=tmp_path), local)
        first = server.shard_gets()
        assert first >= 3
        again = epoch(url, cache_root=tmp_path)  # a later epoch, or a resumed run
        assert same_batches(again, local)
        assert server.shard_gets() == first, "cached shards were downloaded again"
    folder = next((tmp_path / "shards").iterdir())
    assert (folder / ".tokenizer" / "tokenizer.json").is_file()
    assert sorted(p.name for p in folder.glob("shard-*.tar")) == [
        "shard-000000.tar",
        "shard-000001.tar",
        "shard-000002.tar",
    ]
    assert not list(folder.glob(".*part")), "no partial download is left behind"


def test_a_dropped_connection_is_resumed_from_where_it_stopped(served, tmp_path) -> None:
    local = epoch(served / "shards")
    with FileServer(served) as server:
        server.drops = {"shard-000001.tar": 2}
        assert same_batches(epoch(f"{server.url}/shards", cache_root=tmp_path), local)
        assert server.drops["shard-000001.tar"] == 0  # both drops happened, both recovered


def test_a_connection_that_keeps_dropping_is_one_error_naming_shard_and_offset(
    served, tmp_path
) -> None:
    with FileServer(served) as server:
        server.drops = {"shard-000002.tar": 100}
        with pytest.raises(ShardFormatError, match=r"shard-000002\.tar.*byte \d+.*4 retries"):
            epoch(f"{server.url}/shards", cache_root=tmp_path)


def test_the_cache_stays_within_its_limit(served, tmp_path) -> None:
    sizes = [p.stat().st_size for p in (served / "shards").glob("shard-*.tar")]
    limit = max(sizes) + min(sizes) // 2  # room for one shard, not two
    local = epoch(served / "shards")
    with FileServer(served) as server:
        got = epoch(f"{server.url}/shards", cache_root=tmp_path, cache_limit=limit)
        assert same_batches(got, local)
        folder = next((tmp_path / "shards").iterdir())
        held = sum(p.stat().st_size for p in folder.glob("shard-*.tar"))
        assert 0 < held <= limit


def test_a_rebuilt_set_does_not_read_the_old_cached_shards(served, tmp_path, tokenizer_dir):
    copy = tmp_path / "site"
    shutil.copytree(served, copy)
    with FileServer(copy) as server:
        url = f"{server.url}/shards"
        epoch(url, cache_root=tmp_path / "cache")
        shutil.rmtree(copy / "shards")
        make_shards(copy / "shards", [40, 40, 40], tokenizer_dir, block_size=8, seed=7)
        assert same_batches(epoch(url, cache_root=tmp_path / "cache"), epoch(copy / "shards"))


def test_s3_shards_through_a_local_s3_server(served, tmp_path) -> None:
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    with s3_server():
        upload(served / "shards", "s3://corpus/shards")
        got = epoch("s3://corpus/shards", cache_root=tmp_path)
    assert same_batches(got, epoch(served / "shards"))


def test_cloze_train_streams_from_http_and_exports(served, tmp_path, capsys) -> None:
    with FileServer(served) as server:
        args = ["train", "--data", f"{server.url}/shards", "--output", str(tmp_path / "run")]
        args += ["--shard-cache", str(tmp_path / "cache"), "--batch-size", "8", "--no-progress"]
        args += ["--set", "model.hidden_size=32", "--set", "model.num_layers=1"]
        args += ["--set", "model.num_heads=2", "--set", "model.intermediate_size=64"]
        assert main([*args, "--max-steps", "20", "--warmup", "2"]) == 0  # 15 batches an epoch
        gets = server.shard_gets()
        assert main([*args, "--max-steps", "40", "--warmup", "2", "--resume"]) == 0
        assert server.shard_gets() == gets  # epochs 2 and 3 read the cache
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["data"] == f"{server.url}/shards"
    assert (tmp_path / "run" / "tokenizer" / "tokenizer.json").is_file()
    assert main(["export", "--run", str(tmp_path / "run"), "--output", str(tmp_path / "hf")]) == 0
    assert (tmp_path / "hf" / "tokenizer.json").is_file()
    capsys.readouterr()


def test_cloze_inspect_reads_a_shard_set_by_url(served, capsys) -> None:
    assert main(["inspect", "--json", str(served / "shards")]) == 0
    local = json.loads(capsys.readouterr().out)
    with FileServer(served) as server:
        assert main(["inspect", "--json", f"{server.url}/shards"]) == 0
        remote = json.loads(capsys.readouterr().out)
        assert main(["inspect", f"{server.url}/nowhere"]) == 2
        assert "nowhere: no readable .manifest.json" in capsys.readouterr().err
    for key in ("sequences", "tokens", "read", "sequence_length", "problems"):
        assert remote[key] == local[key], key


def test_cloze_inspect_reencodes_a_shard_set_on_s3(served, capsys) -> None:
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    assert main(["inspect", "--json", "--reencode", "5", str(served / "shards")]) == 0
    local = json.loads(capsys.readouterr().out)["reencode"]
    with s3_server():
        upload(served / "shards", "s3://corpus/reencode")
        assert main(["inspect", "--json", "--reencode", "5", "s3://corpus/reencode"]) == 0
        remote = json.loads(capsys.readouterr().out)["reencode"]
    assert remote["texts"] == local["texts"] > 0 and remote["differ"] == 0
