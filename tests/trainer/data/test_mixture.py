"""Mixing shard sets by weight: each batch is the next batch of the set drawn for it, the
draws follow the weights, and a resumed mixture continues exactly."""

from __future__ import annotations

import json
import math

import pytest
import torch

from clozeworks.cli import main
from clozeworks.schemas.errors import UsageError
from clozeworks.trainer.data.loader import ShardDataset
from clozeworks.trainer.data.mixture import MixtureLoader, parse_mixture
from tests.trainer.data.shardsets import make_shards


@pytest.fixture(scope="module")
def sets(tmp_path_factory, tokenizer_dir):
    root = tmp_path_factory.mktemp("mix")
    make_shards(root / "a", [40, 40], tokenizer_dir, block_size=8, seed=1)
    make_shards(root / "b", [16, 16], tokenizer_dir, block_size=8, seed=2)
    make_shards(root / "pairs", [16, 16], tokenizer_dir, block_size=8, mode="nsp")
    return root


def loaders(sets, names=("a", "b")):
    return [ShardDataset(sets / n, batch_size=4, seed=3).loader() for n in names]


def take(stream, n):
    return [next(stream) for _ in range(n)]


def same(x, y) -> bool:
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def test_each_batch_is_the_next_batch_of_the_set_drawn_for_it(sets) -> None:
    mix = MixtureLoader(loaders(sets), [0.7, 0.3], seed=5, rank=0)
    got = take(iter(mix), 60)
    separate = [iter(_endless(loader)) for loader in loaders(sets)]
    for j, batch in enumerate(got):
        assert same(batch, next(separate[mix.choice(j)]))
    assert sum(mix.drawn) == 60 and min(mix.drawn) > 0  # b (8 batches) cycled epochs


def _endless(loader):
    while True:
        yield from loader


def test_draws_follow_the_weights(sets) -> None:
    mix = MixtureLoader(loaders(sets), [0.7, 0.3], seed=11, rank=1)
    n = 4000
    share = sum(mix.choice(j) == 0 for j in range(n)) / n
    assert abs(share - 0.7) < 4 * math.sqrt(0.7 * 0.3 / n)  # 4 sd: 0.029
    other_rank = MixtureLoader(loaders(sets), [0.7, 0.3], seed=11, rank=0)
    assert [mix.choice(j) for j in range(50)] != [other_rank.choice(j) for j in range(50)]


def test_a_resumed_mixture_continues_exactly(sets) -> None:
    whole = take(iter(MixtureLoader(loaders(sets), [1, 1], seed=2, rank=0)), 30)
    first = MixtureLoader(loaders(sets), [1, 1], seed=2, rank=0)
    take(iter(first), 13)
    state = json.loads(json.dumps(first.state_dict()))  # as a checkpoint keeps it
    second = MixtureLoader(loaders(sets), [1, 1], seed=2, rank=0)
    second.load_state_dict(state)
    rest = take(iter(second), 17)
    assert all(same(a, b) for a, b in zip(whole[13:], rest, strict=True))
    third = MixtureLoader(loaders(sets), [2, 1], seed=2, rank=0)
    with pytest.raises(UsageError, match="same weights"):
        third.load_state_dict(state)


def test_mixture_strings_are_checked() -> None:
    assert parse_mixture("s3://x/a=0.6,b=2") == {"s3://x/a": 0.6, "b": 2.0}
    for bad in ("a=0.6,b", "a=0", "a=x", "a=1,a=2"):
        with pytest.raises(UsageError):
            parse_mixture(bad)


def test_cloze_train_mixes_and_resumes(sets, tmp_path, capsys) -> None:
    base = ["train", "--output", str(tmp_path / "run"), "--batch-size", "4", "--warmup", "1"]
    base += ["--no-progress", "--save-every", "5"]
    data = f"{sets / 'a'}=0.6,{sets / 'b'}=0.4"
    assert main([*base, "--data", data, "--max-steps", "10"]) == 0
    assert main([*base, "--data", data, "--max-steps", "20", "--resume"]) == 0
    state = json.loads((tmp_path / "run" / "step-0000020" / "state.json").read_text())
    loader = state["ranks"][0]["loader"]
    assert loader["kind"] == "mixture" and sum(loader["drawn"]) == 20
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["mixture"] == {str(sets / "a"): 0.6, str(sets / "b"): 0.4}
    # The TOML equivalent, without --data.
    toml = tmp_path / "mix.toml"
    toml.write_text(f'[mixture]\n"{sets / "a"}" = 3\n"{sets / "b"}" = 1\n')
    args = ["train", "--output", str(tmp_path / "toml"), "--config", str(toml)]
    assert main([*args, "--max-steps", "2", "--warmup", "1", "--batch-size", "4"]) == 0
    # Sets that make different batches do not mix.
    bad = f"{sets / 'a'}=1,{sets / 'pairs'}=1"
    out = ["train", "--output", str(tmp_path / "bad"), "--max-steps", "2", "--warmup", "1"]
    assert main([*out, "--data", bad, "--objective", "mlm"]) == 2
    assert "differ in mode" in capsys.readouterr().err
