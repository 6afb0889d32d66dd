import pytest
import torch

from clozeworks.trainer.config import ModelConfig, TrainConfig
from clozeworks.trainer.families import build_model, num_parameters
from clozeworks.trainer.models.albert import shared_layers
from clozeworks.trainer.models.bert import decay_groups, padded_vocab
from clozeworks.trainer.models.electra import generator_config, gumbel_sample


def tiny(**kw) -> ModelConfig:
    base = dict(vocab_size=1001, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    return ModelConfig(**{**base, **kw})


def model_for(objectives=("mlm",), **kw):
    return build_model(TrainConfig(model=tiny(**kw), objectives=objectives))


def batch(b=3, length=16, vocab=1001, seed=0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (b, length), generator=g)
    attention = torch.ones_like(ids)
    attention[-1, length // 2 :] = 0
    labels = torch.full_like(ids, -100)
    labels[0, 3] = 17
    labels[1, 5] = 999
    labels[1, 6] = 4
    return {"input_ids": ids, "attention_mask": attention, "labels": labels}


def test_mlm_loss_matches_a_full_softmax_over_predicted_positions() -> None:
    model = model_for().eval()
    inputs = batch()
    out = model(inputs)
    h = model.encoder(inputs["input_ids"], inputs["attention_mask"])
    predict = inputs["labels"] != -100
    logits = model.mlm(h[predict])
    assert logits.shape == (3, 1001)  # sliced back from the padded 1024 rows
    expected = torch.nn.functional.cross_entropy(logits, inputs["labels"][predict])
    assert torch.allclose(out["mlm_loss"], expected)
    assert int(out["mlm_count"]) == 3
    assert padded_vocab(tiny()) == 1024


@pytest.mark.parametrize("family", ["bert", "roberta", "albert"])
def test_padding_does_not_change_real_positions(family: str) -> None:
    model = model_for(family=family, pre_ln=family == "bert", embedding_size=16).eval()
    ids = torch.randint(5, 1001, (1, 8))
    short = model.encoder(ids, torch.ones_like(ids))
    padded_ids = torch.cat([ids, torch.zeros(1, 8, dtype=ids.dtype)], 1)
    mask = torch.cat([torch.ones(1, 8), torch.zeros(1, 8)], 1).long()
    long = model.encoder(padded_ids, mask)
    assert torch.allclose(short, long[:, :8], atol=1e-5)


def test_no_weight_decay_on_biases_and_layer_norms() -> None:
    model = model_for(("mlm", "sbo"))
    decay, no_decay = decay_groups(model, 0.01)
    assert all(p.ndim == 2 for p in decay["params"])
    assert all(p.ndim == 1 for p in no_decay["params"])
    n = sum(p.numel() for g in (decay, no_decay) for p in g["params"])
    assert n == num_parameters(model)


def test_roberta_has_no_token_types() -> None:
    model = model_for(family="roberta")
    assert model.encoder.embeddings.token_type is None
    bert = model_for(family="bert")
    assert num_parameters(bert) - num_parameters(model) == 2 * 32


def test_albert_factorizes_the_embedding_and_shares_layers() -> None:
    config = tiny(family="albert", embedding_size=16, num_layers=4)
    unshared = build_model(TrainConfig(model=ModelConfig(**{**config.__dict__, "share": "none"})))
    per_layer = sum(p.numel() for p in unshared.encoder.layers[0].parameters())
    attention = sum(p.numel() for p in unshared.encoder.layers[0].attention.parameters()) + 64
    ffn = per_layer - attention
    for share, saved in [("all", 3 * per_layer), ("attention", 3 * attention), ("ffn", 3 * ffn)]:
        model = build_model(TrainConfig(model=ModelConfig(**{**config.__dict__, "share": share})))
        assert num_parameters(unshared) - num_parameters(model) == saved, share
    model = model_for(family="albert", embedding_size=16, share="all")
    assert model.encoder.embeddings.word.weight.shape == (1024, 16)
    assert model.encoder.project.weight.shape == (32, 16)
    layers = shared_layers(tiny(share="attention", num_layers=3))
    assert layers[2].attention is layers[0].attention and layers[2].ffn is not layers[0].ffn


def test_electra_generator_is_a_fraction_and_shares_embeddings() -> None:
    config = tiny(family="electra", hidden_size=256, num_heads=4, embedding_size=128)
    gen = generator_config(config)
    assert (gen.hidden_size, gen.num_heads, gen.intermediate_size) == (64, 1, 256)
    model = build_model(TrainConfig(model=config, objectives=("mlm", "rtd")))
    assert model.generator.embeddings is model.discriminator.embeddings
    assert model.mlm.decoder is model.discriminator.embeddings.word
    out = model(batch())
    expected = out["mlm_loss"] + 50 * out["rtd_loss"]
    assert torch.allclose(out["loss"], expected)
    assert int(out["rtd_count"]) == int(batch()["attention_mask"].sum())


def test_electra_sampling_is_a_function_of_the_seed() -> None:
    model = model_for(("mlm", "rtd"), family="electra").eval()
    inputs = batch()
    a, b, c = model(inputs, seed=1), model(inputs, seed=1), model(inputs, seed=2)
    assert torch.equal(a["rtd_loss"], b["rtd_loss"])
    assert not torch.equal(a["rtd_loss"], c["rtd_loss"])


def test_gumbel_sampling_follows_the_softmax() -> None:
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = probs.log().expand(20_000, 4)
    counts = torch.bincount(gumbel_sample(logits, seed=7), minlength=4).float() / 20_000
    # 20k draws: standard error <= 0.0036, so 0.015 is over 4 sigma.
    assert torch.allclose(counts, probs, atol=0.015), counts


def test_sentence_heads_have_their_class_counts() -> None:
    for objective, classes in [("nsp", 2), ("sop", 2), ("sso", 3)]:
        model = model_for(("mlm", objective))
        assert model.sentence.classifier.out_features == classes
        inputs = batch()
        key = "next_sentence_label" if objective == "nsp" else "sentence_order_label"
        inputs[key] = torch.tensor([0, 1, classes - 1])
        out = model(inputs)
        assert out["loss"] > out["mlm_loss"] and int(out[f"{objective}_count"]) == 3


@pytest.mark.parametrize(
    ("family", "objectives", "extra"),
    [
        ("bert", ("mlm",), {}),
        ("roberta", ("mlm",), {"pre_ln": True}),
        ("albert", ("mlm",), {"embedding_size": 16, "share": "all"}),
        ("electra", ("mlm", "rtd"), {"embedding_size": 16, "generator_fraction": 0.5}),
    ],
)
def test_gradient_checkpointing_gives_the_same_loss_and_gradients(family, objectives, extra):
    """Recomputed layers replay the RNG, so even with dropout the gradients are the same."""
    from clozeworks.trainer.models.bert import Encoder

    results = []
    for on in (False, True):
        model = model_for(objectives, family=family, dropout=0.2, **extra).train()
        encoders = [m for m in model.modules() if isinstance(m, Encoder)]
        assert encoders
        for m in encoders:
            m.checkpointing = on
        torch.manual_seed(3)
        saved = []  # what autograd keeps for the backward pass

        def pack(t, saved=saved):
            saved.append(t.numel())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(batch(), seed=5)
        out["loss"].backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append((out["loss"].detach(), grads, sum(saved)))
    (loss_a, grads_a, kept_a), (loss_b, grads_b, kept_b) = results
    assert kept_b < 0.7 * kept_a, (kept_a, kept_b)  # the layers' activations were not kept
    assert torch.equal(loss_a, loss_b)
    assert grads_a.keys() == grads_b.keys() and len(grads_a) > 10
    for name in grads_a:
        assert torch.allclose(grads_a[name], grads_b[name], atol=1e-6, rtol=1e-5), name
