"""`--eval-split`: a held-out slice of the training shards, the same whatever the world size
or resume, never trained on, evaluated with loss, accuracy and perplexity."""

from __future__ import annotations

import json

import pytest

from clozeworks.cli import main
from clozeworks.trainer.data.loader import ShardDataset
from clozeworks.trainer.data.source import resolve_source
from tests.trainer.data.shardsets import make_shards, sequence_ids

SIZES = [37, 37, 36, 36]


@pytest.fixture(scope="module")
def shards(tmp_path_factory, tokenizer_dir):
    directory = tmp_path_factory.mktemp("split")
    make_shards(directory, SIZES, tokenizer_dir, block_size=8)
    return directory


def ids(source, part: str, rank: int = 0, world: int = 1, batch: int = 3) -> list[int]:
    ds = ShardDataset(
        source, batch_size=batch, seed=4, rank=rank, world_size=world, eval_split=0.1, part=part
    )
    return [i for b in ds.loader() for i in sequence_ids(b)]


def test_the_held_out_share_is_each_shard_s_tail_in_proportion(shards) -> None:
    train, held = resolve_source(shards).split(0.1)
    assert sum(held.sizes) == round(0.1 * sum(SIZES))  # 15 of 146
    for i, n in enumerate(SIZES):
        (a, b), (c, d) = train.span(i), held.span(i)
        assert a == 0 and b == c and d == n
        assert abs((d - c) - 0.1 * n) < 1  # proportional, within rounding
    assert resolve_source(shards).split(0.0)[1].sizes == (0, 0, 0, 0)


def test_no_held_out_sequence_is_ever_trained_on_at_any_world_size(shards) -> None:
    held = set(ids(shards, "eval", batch=1))
    assert len(held) == round(0.1 * sum(SIZES))
    for world in (1, 2, 3):
        trained = [i for r in range(world) for i in ids(shards, "train", r, world)]
        assert len(trained) == len(set(trained))
        assert not held & set(trained)
        # Everything else is trained on, but for what does not fill a last batch per rank.
        assert sum(SIZES) - len(held) - len(trained) < 3 * world + world
        evaluated = {i for r in range(world) for i in ids(shards, "eval", r, world, batch=2)}
        assert evaluated <= held and len(held) - len(evaluated) < 2 * world + world


def test_too_small_a_held_out_set_is_named(shards, tmp_path, capsys) -> None:
    args = ["train", "--data", str(shards), "--output", str(tmp_path / "run"), "--no-progress"]
    args += ["--eval-split", "0.5%", "--batch-size", "8", "--max-steps", "2", "--warmup", "1"]
    assert main(args) == 2
    assert "holds out 1 sequences" in capsys.readouterr().err
    assert main([*args, "--eval-data", str(shards)]) == 2
    assert "--eval-data and --eval-split both name a held-out set" in capsys.readouterr().err


def evals(run) -> list[dict]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [
        {k: v for k, v in r.items() if k.startswith("eval_")}
        for r in records
        if any(k.startswith("eval_") for k in r)
    ]


def test_train_evaluates_the_split_and_resumes_to_the_same_numbers(shards_dir, tmp_path):
    args = ["train", "--data", str(shards_dir), "--batch-size", "8", "--warmup", "1"]
    args += ["--eval-split", "10%", "--eval-every", "2", "--eval-batches", "3", "--no-progress"]
    args += ["--set", "optim.decay_steps=6"]  # the same schedule when stopped at 4
    one, two = tmp_path / "one", tmp_path / "two"
    assert main([*args, "--output", str(one), "--max-steps", "6"]) == 0
    assert main([*args, "--output", str(two), "--max-steps", "4", "--save-every", "4"]) == 0
    assert main([*args, "--output", str(two), "--max-steps", "6", "--resume"]) == 0
    got = evals(one)
    assert len(got) == 3  # steps 2, 4, 6
    for record in got:
        assert {"eval_mlm_loss", "eval_mlm_accuracy", "eval_mlm_perplexity"} <= set(record)
        assert record["eval_mlm_perplexity"] == pytest.approx(
            2.718281828 ** record["eval_mlm_loss"]
        )
    assert evals(two) == got
