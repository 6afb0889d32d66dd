import pytest
import torch

from clozeworks.schemas.errors import UsageError
from clozeworks.schemas.manifest import read_manifest
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.config import ModelConfig, TrainConfig
from clozeworks.trainer.families import build_model
from clozeworks.trainer.heads import span_boundaries
from clozeworks.trainer.objectives import check_objectives


def test_span_boundaries_are_the_tokens_just_outside_each_span() -> None:
    predict = torch.tensor([[0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0]], dtype=torch.bool)
    left, right = span_boundaries(predict)
    rows = predict[0]
    assert left[0][rows].tolist() == [0, 0, 4, 6, 6, 6]
    assert right[0][rows].tolist() == [3, 3, 6, 10, 10, 10]


def test_sbo_predicts_every_masked_token_from_its_boundaries() -> None:
    config = ModelConfig(
        vocab_size=500, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64
    )
    model = build_model(TrainConfig(model=config, objectives=("mlm", "sbo"))).eval()
    ids = torch.randint(5, 500, (2, 12))
    labels = torch.full_like(ids, -100)
    labels[0, 3:6] = ids[0, 3:6]
    labels[1, 7] = ids[1, 7]
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
    out = model(batch)
    assert int(out["sbo_count"]) == 4
    assert torch.allclose(out["loss"], out["mlm_loss"] + out["sbo_loss"])
    # The SBO prediction of a span token depends on the boundary tokens, not on the span.
    h = model.encoder(ids, batch["attention_mask"])
    index = (labels.flatten() != -100).nonzero().squeeze(1)
    changed = h.clone()
    changed[0, 4] += 1.0  # inside the span
    assert torch.allclose(model.sbo(h, index, batch), model.sbo(changed, index, batch))
    changed[0, 6] += 1.0  # its right boundary
    before, after = model.sbo(h, index, batch), model.sbo(changed, index, batch)
    assert not torch.allclose(before[:3], after[:3])


def test_wso_predicts_the_shuffled_positions() -> None:
    config = ModelConfig(
        vocab_size=500, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64
    )
    model = build_model(TrainConfig(model=config, objectives=("mlm", "wso"))).eval()
    ids = torch.randint(5, 500, (2, 12))
    labels = torch.full_like(ids, -100)
    labels[0, 2] = ids[0, 2]
    wso = torch.full_like(ids, -100)
    wso[1, 4:7] = ids[1, torch.tensor([6, 4, 5])]
    batch = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "labels": labels,
        "wso_labels": wso,
    }
    out = model(batch)
    assert int(out["wso_count"]) == 3 and int(out["mlm_count"]) == 1


@pytest.mark.parametrize(
    ("family", "objectives", "message"),
    [
        ("bert", ("mlm", "nsp"), "needs shards built with --mode nsp"),
        ("bert", ("nsp",), "every family trains with mlm"),
        ("roberta", ("mlm", "rtd"), "rtd needs the electra family"),
        ("electra", ("mlm",), "exactly mlm"),
        ("bert", ("mlm", "sbo"), "use span masking"),
    ],
)
def test_objectives_are_checked_against_the_family_and_the_shards(
    shards_dir, family, objectives, message
) -> None:
    config = TrainConfig(model=ModelConfig(family=family), objectives=objectives)
    with pytest.raises(UsageError, match=message):
        check_objectives(config, read_manifest(shards_dir), str(shards_dir))
    span = TrainConfig(objectives=("mlm", "sbo"), masking=MaskingSettings(kind="span"))
    check_objectives(span, read_manifest(shards_dir), str(shards_dir))
