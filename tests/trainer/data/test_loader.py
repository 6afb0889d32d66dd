"""The loader's contract: HF-named batches, equal batches per rank with no sequence twice,
the same batches whatever the number of workers, and exact resumption."""

import itertools

import pytest
import torch

from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.data.loader import ShardDataset
from tests.trainer.data.shardsets import make_shards, sequence_ids

# Three workers on this two-core machine are the point of some tests.
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")


def take(loader, n):
    out = []
    if n == 0:
        return out
    for batch in loader:
        out.append(batch)
        if len(out) == n:
            break
    return out


def same(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def small(tmp_path_factory, tokenizer_dir):
    """Four uneven shards in blocks of 16: 40 batches of 4 per epoch."""
    directory = tmp_path_factory.mktemp("small")
    make_shards(directory, [41, 40, 40, 40], tokenizer_dir, block_size=16)
    return directory


def dataset(path, **kw):
    kw.setdefault("batch_size", 4)
    kw.setdefault("seed", 7)
    kw.setdefault("shuffle_buffer", 48)
    return ShardDataset(path, **kw)


def test_batches_are_named_as_transformers_takes_them(shards_dir) -> None:
    ds = ShardDataset(shards_dir, batch_size=16, seed=3, masking=MaskingSettings(kind="wwm"))
    (batch,) = take(ds.loader(), 1)
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels"}
    b, length = batch["input_ids"].shape
    assert b == 16 and length % 8 == 0 and length <= 64
    assert batch["attention_mask"].sum(1).max() > length - 8  # padded to the longest only
    predicted = batch["labels"] != -100
    assert predicted.any() and not (predicted & (batch["attention_mask"] == 0)).any()


def test_batches_feed_a_transformers_model(shards_dir) -> None:
    from transformers import BertConfig, BertForMaskedLM

    ds = ShardDataset(shards_dir, batch_size=4, seed=0)
    (batch,) = take(ds.loader(), 1)
    model = BertForMaskedLM(
        BertConfig(
            vocab_size=2000,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
        )
    )
    out = model(**batch)
    assert torch.isfinite(out.loss)


def test_an_epoch_reads_every_sequence_once_and_epochs_differ(small) -> None:
    ds = dataset(small)
    loader = ds.loader()
    epoch0 = [sequence_ids(b) for b in loader]
    epoch1 = [sequence_ids(b) for b in loader]
    assert len(epoch0) == len(epoch1) == ds.batches_per_epoch() == 40
    seen = list(itertools.chain(*epoch0))
    assert len(seen) == len(set(seen)) == 160 and max(seen) < 161
    assert epoch0 != epoch1 and sorted(seen) != seen
    assert loader.state_dict()["epoch"] == 2


@pytest.mark.parametrize("workers", [2, 3])
def test_worker_count_does_not_change_the_batches(small, workers) -> None:
    ds = dataset(small, masking=MaskingSettings(kind="span"))
    reference = list(ds.loader())
    got = list(ds.loader(num_workers=workers))
    assert len(got) == len(reference)
    assert all(same(a, b) for a, b in zip(reference, got, strict=True))


@pytest.fixture(scope="module")
def two_epochs(small):
    ds = dataset(small)
    loader = ds.loader()
    return [list(loader), list(loader)]


@pytest.mark.parametrize("workers", [0, 2, 3])
@pytest.mark.parametrize("at", [0, 1, 10, "end", "after-end"])
def test_resume_yields_exactly_the_uninterrupted_batches(small, two_epochs, workers, at) -> None:
    ds = dataset(small)
    interrupted = ds.loader()
    if at == "after-end":  # the loop ran out: state points at the next epoch
        list(interrupted)
        done = ds.batches_per_epoch()
    else:
        done = ds.batches_per_epoch() if at == "end" else at
        take(interrupted, done)  # a checkpoint right after batch `done`
    state = interrupted.state_dict()
    resumed = ds.loader(num_workers=workers)
    resumed.load_state_dict(state)
    expected = two_epochs[0][done:] if at != "after-end" else []
    got = [] if at in ("end", "after-end") else list(resumed)
    assert len(got) == len(expected)
    assert all(same(a, b) for a, b in zip(expected, got, strict=True))
    following = take(resumed, 3)
    assert all(same(a, b) for a, b in zip(two_epochs[1][:3], following, strict=True))


def test_resume_with_another_worker_count_is_exact(small, two_epochs) -> None:
    ds = dataset(small)
    first = ds.loader(num_workers=2)
    take(first, 7)
    resumed = ds.loader(num_workers=3)
    resumed.load_state_dict(first.state_dict())
    got = list(resumed)
    assert all(same(a, b) for a, b in zip(two_epochs[0][7:], got, strict=True))


def test_changed_world_size_mid_epoch_is_elastic_and_exact_at_a_boundary(small) -> None:
    two = dataset(small, rank=0, world_size=2).loader()
    take(two, 5)
    three = dataset(small, rank=1, world_size=3).loader()
    three.load_state_dict(two.state_dict())  # the rest of the epoch (test_elastic.py)
    assert three.batches == 0 and [s[1] for s in three.history] == [5]
    three = dataset(small, rank=1, world_size=3).loader()
    list(two)  # finish the epoch: the state now points at epoch 1, batch 0
    three.load_state_dict(two.state_dict())
    fresh = dataset(small, rank=1, world_size=3).loader()
    list(fresh)
    assert all(same(a, b) for a, b in zip(take(fresh, 4), take(three, 4), strict=True))


def test_an_epoch_without_a_batch_is_an_error_not_a_hang(small) -> None:
    ds = dataset(small, batch_size=64, rank=0, world_size=4)  # 40 sequences per rank
    assert ds.batches_per_epoch() == 0
    with pytest.raises(UsageError, match="do not fill one batch of 64 on each of 4 rank"):
        next(iter(ds.loader()))


def test_a_state_with_another_seed_is_refused(small) -> None:
    state = dataset(small).loader().state_dict()
    with pytest.raises(UsageError, match="seed"):
        dataset(small, seed=8).loader().load_state_dict(state)


@pytest.mark.parametrize("workers", [0, 2])
def test_three_ranks_over_two_shards_get_equal_batches_and_no_duplicates(
    tmp_path, tokenizer_dir, workers
) -> None:
    make_shards(tmp_path, [49, 48], tokenizer_dir, block_size=16)
    per_rank = []
    for rank in range(3):
        ds = dataset(tmp_path, rank=rank, world_size=3)
        batches = list(ds.loader(num_workers=workers))
        assert len(batches) == ds.batches_per_epoch() == 97 // 3 // 4
        per_rank.append([i for b in batches for i in sequence_ids(b)])
    everything = list(itertools.chain(*per_rank))
    assert len(everything) == len(set(everything)) == 3 * 8 * 4


def test_more_ranks_than_sequences_per_shard_still_balance(tmp_path, tokenizer_dir) -> None:
    # 2 shards, 5 ranks x 3 workers: shards are far fewer than readers
    make_shards(tmp_path, [13, 12], tokenizer_dir, block_size=4)
    counts = [
        len(list(dataset(tmp_path, rank=r, world_size=5, batch_size=2).loader(num_workers=3)))
        for r in range(5)
    ]
    assert counts == [2] * 5


def test_pair_modes_carry_token_types_and_the_sentence_label(tmp_path, tokenizer_dir) -> None:
    make_shards(tmp_path, [30, 30], tokenizer_dir, mode="sop")
    ds = dataset(tmp_path, objectives=("mlm", "sop"))
    batch = take(ds.loader(), 1)[0]
    assert set(batch) == {
        "input_ids",
        "attention_mask",
        "token_type_ids",
        "labels",
        "sentence_order_label",
    }
    types, attention = batch["token_type_ids"], batch["attention_mask"]
    assert not (types.bool() & ~attention.bool()).any()
    firsts = ((types == 0) & attention.bool()).sum(1)  # segment A with [CLS] and its [SEP]
    original = batch["labels"].where(batch["labels"] >= 0, batch["input_ids"])
    assert (torch.gather(original, 1, (firsts - 1)[:, None]) == 3).all()
    with pytest.raises(UsageError, match="objective nsp needs shards built with --mode nsp"):
        dataset(tmp_path, objectives=("mlm", "nsp"))


def test_premasked_shards_pass_through_unchanged(tmp_path, tokenizer_dir) -> None:
    from clozeworks.corpus.shards.blocks import iter_blocks

    make_shards(tmp_path, [20, 20], tokenizer_dir, premask=True)
    stored = {}
    for name in ("shard-000000.tar", "shard-000001.tar"):
        for _, block in iter_blocks(tmp_path / name):
            for i in range(len(block)):
                seq = block.sequence(i).astype("int64")
                pos, lab = block.predictions(i)
                original = seq.copy()
                original[pos] = lab
                stored[(int(original[1]), int(original[2]))] = (seq, pos, lab)
    for batch in dataset(tmp_path).loader():
        for row, i in enumerate(sequence_ids(batch)):
            seq, pos, lab = stored[(5 + i // 1000, 5 + i % 1000)]
            n = len(seq)
            assert batch["input_ids"][row, :n].tolist() == seq.tolist()
            labels = batch["labels"][row]
            assert (labels >= 0).nonzero().flatten().tolist() == pos.tolist()
            assert labels[pos.tolist()].tolist() == lab.tolist()
    with pytest.raises(UsageError, match="pre-masked"):
        dataset(tmp_path, objectives=("mlm", "sbo"))


def test_length_bucketing_pads_less_and_keeps_every_sequence(tmp_path, tokenizer_dir) -> None:
    make_shards(tmp_path, [64, 64], tokenizer_dir, block_size=32, max_len=120)
    plain = list(dataset(tmp_path, shuffle_buffer=128, streams=1).loader())
    bucketed = list(
        dataset(tmp_path, shuffle_buffer=128, streams=1, length_bucketing=True).loader()
    )

    def padding(batches):
        return sum(int((b["attention_mask"] == 0).sum()) for b in batches)

    assert padding(bucketed) < 0.5 * padding(plain)
    ids = sorted(i for b in bucketed for i in sequence_ids(b))
    assert ids == sorted(i for b in plain for i in sequence_ids(b))


def test_masking_on_the_device_gives_the_same_batches(small) -> None:
    ds = dataset(small, masking=MaskingSettings(kind="ngram"), objectives=("mlm", "sbo", "wso"))
    in_workers = list(ds.loader(num_workers=2))
    on_device = list(ds.loader(num_workers=2, mask_device="cpu"))
    assert all(same(a, b) for a, b in zip(in_workers, on_device, strict=True))


def test_a_different_tokenizer_is_refused(shards_dir) -> None:
    with pytest.raises(BadInputError, match="different tokenizer"):
        ShardDataset(shards_dir, batch_size=4, tokenizer_sha256="0" * 64)


@pytest.mark.parametrize("kind", ["token", "wwm", "span", "ngram"])
def test_dynamic_masking_keeps_the_statistics(shards_dir, kind) -> None:
    # The shard builder's tolerances: 15% +- 0.5 of maskable tokens, 80/10/10 +- 1.5
    # points. Two epochs of the session's build hold ~115k maskable tokens: the standard
    # error of the share is ~0.15 point. Span masking draws 80/10/10 per span (~2k spans
    # an epoch), so it gets eight epochs: ~0.3 point for the split.
    ds = ShardDataset(shards_dir, batch_size=64, seed=1, masking=MaskingSettings(kind=kind))
    loader = ds.loader()
    maskable = predicted = masked = kept = 0
    for _ in range(8 if kind == "span" else 2):
        for batch in loader:
            ids, labels = batch["input_ids"], batch["labels"]
            original = torch.where(labels >= 0, labels, ids)
            maskable += int(((batch["attention_mask"] == 1) & (original > 4)).sum())
            hit = labels >= 0
            predicted += int(hit.sum())
            masked += int((ids[hit] == 4).sum())
            kept += int((ids[hit] == labels[hit]).sum())
    assert abs(predicted / maskable - 0.15) <= 0.005, predicted / maskable
    assert abs(masked / predicted - 0.8) <= 0.015, masked / predicted
    assert abs(kept / predicted - 0.1) <= 0.015, kept / predicted
