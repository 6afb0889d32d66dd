"""The unpadded encoder (token-wise layers on the real tokens only, attention over
variable-length rows) gives the padded encoder's outputs and gradients, for every family,
through both attention paths (jagged nested tensors, used on a GPU; re-padded, on a CPU)."""

from __future__ import annotations

import pytest
import torch

from clozeworks.trainer.batch_index import PACKING, packing, prepare
from clozeworks.trainer.config import ModelConfig, TrainConfig
from clozeworks.trainer.families import build_model
from clozeworks.trainer.models.bert import Encoder, SelfAttention

LENGTHS = [24, 3, 10, 17, 24, 8]  # a full row, a very short one, and between
WIDTH = 24


def small(**kw) -> ModelConfig:
    base = dict(
        vocab_size=200,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        dropout=0.0,
        attention_dropout=0.0,
    )
    return ModelConfig(**{**base, **kw})


def padded_batch(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(LENGTHS)
    mask = (torch.arange(WIDTH)[None] < lengths[:, None]).long()  # [B, L]
    ids = torch.randint(5, 200, (len(LENGTHS), WIDTH), generator=g) * mask
    types = (torch.arange(WIDTH)[None] >= 6).long() * mask
    labels = torch.full_like(ids, -100)
    pick = (torch.rand(ids.shape, generator=g) < 0.3) & mask.bool()
    pick[:, 0] = False  # [CLS] and the final [SEP] are never predicted
    pick[torch.arange(len(LENGTHS)), lengths - 1] = False
    labels[pick] = ids[pick]
    ids = torch.where(pick, torch.full_like(ids, 4), ids)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": types,
        "labels": labels,
        "next_sentence_label": torch.randint(0, 2, (len(LENGTHS),), generator=g),
    }


def test_packing_maps_the_real_tokens() -> None:
    batch = padded_batch()
    layout = packing(batch["attention_mask"])
    assert layout is not None
    assert layout.index.numel() == sum(LENGTHS)
    assert layout.offsets.tolist() == [0, *torch.tensor(LENGTHS).cumsum(0).tolist()]
    assert (layout.min_len, layout.max_len) == (min(LENGTHS), max(LENGTHS))
    rows, cols = layout.index // WIDTH, layout.index % WIDTH
    assert bool(batch["attention_mask"][rows, cols].all())
    assert torch.equal(layout.positions, cols)


def test_no_packing_without_padding_or_for_holes() -> None:
    assert packing(torch.ones(3, 8, dtype=torch.long)) is None  # nothing to skip
    holes = torch.ones(2, 8, dtype=torch.long)
    holes[0, 3] = 0  # padding inside a row: kept padded, never misread
    assert packing(holes) is None
    assert PACKING not in prepare({"attention_mask": holes, "input_ids": holes}, unpad=True)


@pytest.mark.parametrize("pre_ln", [False, True])
def test_unpadded_encoder_gives_the_padded_outputs_and_gradients(pre_ln: bool) -> None:
    torch.manual_seed(0)
    encoder = Encoder(small(pre_ln=pre_ln))
    batch = prepare(padded_batch(), unpad=True)
    ids, mask, types = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    real = mask.bool()
    padded = encoder(ids, mask, types)
    unpadded = encoder(ids, mask, types, packing=batch[PACKING])
    torch.testing.assert_close(unpadded[real], padded[real], atol=2e-6, rtol=1e-5)
    assert unpadded[~real].abs().max() == 0  # padding positions are zeros, never read
    weights = torch.randn_like(padded[real])
    params = list(encoder.parameters())
    a = torch.autograd.grad((padded[real] * weights).sum(), params)
    b = torch.autograd.grad((unpadded[real] * weights).sum(), params)
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(y, x, atol=1e-5, rtol=1e-4)


# The jagged path's CPU fallback goes through the older strided nested tensors.
@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype")
def test_both_attention_paths_agree() -> None:
    torch.manual_seed(0)
    attention = SelfAttention(small())
    layout = packing(padded_batch()["attention_mask"])
    assert layout is not None
    x = torch.randn(layout.index.numel(), 32)  # [T, H]
    torch.testing.assert_close(
        attention._jagged(x, layout, 0.0), attention._repadded(x, layout, 0.0)
    )


@pytest.mark.parametrize(
    ("family", "objectives", "extra"),
    [
        ("bert", ("mlm", "nsp"), {}),
        ("bert", ("mlm", "sbo"), {}),
        ("albert", ("mlm", "sop"), {"embedding_size": 16, "share": "all"}),
        ("electra", ("mlm", "rtd"), {"embedding_size": 16}),
    ],
)
def test_every_family_trains_the_same_unpadded(family, objectives, extra) -> None:
    torch.manual_seed(0)
    model = build_model(
        TrainConfig(model=small(family=family, **extra), objectives=objectives)
    ).train()
    batch = padded_batch()
    if "sop" in objectives:
        batch["sentence_order_label"] = batch.pop("next_sentence_label")
    padded = model(prepare(batch, unpad=False), seed=3)
    unpadded = model(prepare(batch, unpad=True), seed=3)
    for key, value in padded.items():
        torch.testing.assert_close(unpadded[key].float(), value.float(), atol=1e-5, rtol=1e-5)
    params = [p for p in model.parameters() if p.requires_grad]
    a = torch.autograd.grad(padded["loss"], params, allow_unused=True)
    b = torch.autograd.grad(unpadded["loss"], params, allow_unused=True)
    for x, y in zip(a, b, strict=True):
        if x is not None:
            torch.testing.assert_close(y, x, atol=1e-5, rtol=1e-4)
