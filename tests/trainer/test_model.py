import torch

from trainer.config import ModelConfig
from trainer.models.bert import BertForPretraining, decay_groups, padded_vocab


def tiny(**kw) -> ModelConfig:
    return ModelConfig(
        vocab_size=1001, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, **kw
    )


def test_mlm_loss_matches_a_full_softmax_over_predicted_positions() -> None:
    torch.manual_seed(0)
    model = BertForPretraining(tiny()).eval()
    ids = torch.randint(5, 1001, (3, 16))
    attention = torch.ones_like(ids)
    attention[2, 10:] = 0
    labels = torch.full_like(ids, -100)
    labels[0, 3] = 17
    labels[1, 5] = 999
    out = model(ids, attention, labels)
    h = model.encoder(ids, attention)
    logits = model.mlm(h[labels != -100])
    assert logits.shape == (2, 1001)  # sliced back from the padded 1024 rows
    expected = torch.nn.functional.cross_entropy(logits, torch.tensor([17, 999]))
    assert torch.allclose(out["mlm_loss"], expected)
    assert padded_vocab(tiny()) == 1024


def test_padding_does_not_change_real_positions() -> None:
    torch.manual_seed(0)
    model = BertForPretraining(tiny(pre_ln=True)).eval()
    ids = torch.randint(5, 1001, (1, 8))
    short = model.encoder(ids, torch.ones_like(ids))
    padded_ids = torch.cat([ids, torch.zeros(1, 8, dtype=ids.dtype)], 1)
    mask = torch.cat([torch.ones(1, 8), torch.zeros(1, 8)], 1).long()
    long = model.encoder(padded_ids, mask)
    assert torch.allclose(short, long[:, :8], atol=1e-5)


def test_no_weight_decay_on_biases_and_layer_norms() -> None:
    model = BertForPretraining(tiny())
    decay, no_decay = decay_groups(model, 0.01)
    assert all(p.ndim == 2 for p in decay["params"])
    assert all(p.ndim == 1 for p in no_decay["params"])
    n = sum(p.numel() for g in (decay, no_decay) for p in g["params"])
    assert n == model.num_parameters()
