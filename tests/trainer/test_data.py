import pytest
import torch

from schemas.errors import BadInputError
from trainer.data import MaskingConfig, ShardDataset


def take(loader, n):
    out = []
    for batch in loader:
        out.append(batch)
        if len(out) == n:
            break
    return out


def test_batches_are_named_as_transformers_takes_them(shards_dir) -> None:
    ds = ShardDataset(shards_dir, batch_size=16, seed=3, masking=MaskingConfig(kind="wwm"))
    (batch,) = take(ds.loader(), 1)
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels"}
    b, length = batch["input_ids"].shape
    assert b == 16 and length % 8 == 0 and length <= 64
    assert batch["attention_mask"].sum(1).max() == batch["attention_mask"].sum(1).max()
    predicted = batch["labels"] != -100
    assert predicted.any() and not (predicted & (batch["attention_mask"] == 0)).any()


def test_resume_mid_epoch_yields_exactly_the_same_batches(shards_dir) -> None:
    ds = ShardDataset(shards_dir, batch_size=8, seed=5, shuffle_buffer=64)
    reference = ds.loader()
    first = take(reference, 3)
    state = reference.state_dict()
    rest = take(reference, 4)
    resumed = ds.loader()
    resumed.load_state_dict(state)
    again = take(resumed, 4)
    assert len(first) == 3
    for a, b in zip(rest, again, strict=True):
        for key in a:
            assert torch.equal(a[key], b[key]), key


def test_epochs_differ_and_cover_the_data(shards_dir) -> None:
    ds = ShardDataset(shards_dir, batch_size=1, seed=1, shuffle_buffer=32)
    loader = ds.loader()
    epoch0 = [b["labels"].clone() for b in loader]
    epoch1 = [b["labels"].clone() for b in loader]
    assert len(epoch0) == len(epoch1) == ds.manifest.sequences
    assert any(not torch.equal(a, b) for a, b in zip(epoch0, epoch1, strict=True))
    assert loader.state_dict()["epoch"] == 2


def test_a_different_tokenizer_is_refused(shards_dir) -> None:
    with pytest.raises(BadInputError, match="different tokenizer"):
        ShardDataset(shards_dir, batch_size=4, tokenizer_sha256="0" * 64)
