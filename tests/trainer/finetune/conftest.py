"""A tiny pretrained run (BERT, 2 layers of 32) that the fine-tuning tests start from."""

import pytest

from clozeworks.cli import main


@pytest.fixture(scope="session")
def tiny_run(nsp_shards, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pretrained")
    config = tmp / "small.toml"
    config.write_text(
        "[model]\nhidden_size = 32\nnum_layers = 2\nnum_heads = 2\nintermediate_size = 64\n"
        "[optim]\nwarmup_steps = 1\n",
        encoding="utf-8",
    )
    run = tmp / "run"
    args = ["train", "--data", str(nsp_shards), "--output", str(run), "--config", str(config)]
    assert (
        main(
            [
                *args,
                "--objective",
                "mlm,nsp",
                "--max-steps",
                "2",
                "--batch-size",
                "4",
                "--no-progress",
            ]
        )
        == 0
    )
    return run
