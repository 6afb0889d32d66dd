"""Fine-tuned models load in transformers' ...ForSequenceClassification and
...ForTokenClassification with no missing or unexpected weights and give our logits
(within 1e-4)."""

import pytest
import torch

from clozeworks.trainer.config import ModelConfig, TrainConfig
from clozeworks.trainer.families import build_model
from clozeworks.trainer.finetune.export import sequence_to_transformers, to_transformers_task
from clozeworks.trainer.finetune.model import (
    Backbone,
    ChoiceModel,
    QAModel,
    SequenceModel,
    TokenModel,
)
from tests.trainer.test_export import TINY, inputs, jitter

CASES = {
    "bert": (dict(family="bert"), ("mlm", "nsp")),
    "bert-pre-ln": (dict(family="bert", pre_ln=True), ("mlm",)),
    "roberta": (dict(family="roberta", type_vocab_size=0, pad_token_id=1), ("mlm",)),
    "albert": (dict(family="albert", embedding_size=16, share="all"), ("mlm", "sop")),
    "electra": (dict(family="electra", embedding_size=16), ("mlm", "rtd")),
    "distilbert": (dict(family="distilbert", type_vocab_size=0), ("mlm",)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("labels", [("neg", "pos", "mixed"), ()])
def test_sequence_export_gives_our_logits(case, labels) -> None:
    arch, objectives = CASES[case]
    config = TrainConfig(model=ModelConfig(**TINY, **arch), objectives=objectives)
    backbone = Backbone(config, build_model(config), tokenizer=None, source="test")
    model = jitter(SequenceModel.from_backbone(backbone, max(1, len(labels))))
    if backbone.pooler is not None and model.head.layout.pooled:
        # The pooler starts from the pretrained sentence head, as in transformers.
        fresh = SequenceModel.from_backbone(backbone, max(1, len(labels)))
        assert torch.equal(fresh.head.dense.weight, backbone.pooler.weight)
    hf = sequence_to_transformers(model, config, labels)
    types = config.model.type_vocab_size > 0
    batch = inputs(types, pad_id=config.model.pad_token_id)
    with torch.no_grad():
        ours = model(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
        theirs = hf(**batch).logits
    assert ours.shape == (3, max(1, len(labels)))
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=0)
    assert hf.config.problem_type == ("single_label_classification" if labels else "regression")
    if labels:
        assert hf.config.id2label[1] == labels[1]


@pytest.mark.parametrize("case", sorted(CASES))
def test_token_export_gives_our_logits(case) -> None:
    arch, objectives = CASES[case]
    config = TrainConfig(model=ModelConfig(**TINY, **arch), objectives=objectives)
    backbone = Backbone(config, build_model(config), tokenizer=None, source="test")
    labels = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
    model = jitter(TokenModel.from_backbone(backbone, len(labels)))
    hf = to_transformers_task(model, config, labels)
    assert type(hf).__name__.endswith("ForTokenClassification")
    batch = inputs(config.model.type_vocab_size > 0, pad_id=config.model.pad_token_id)
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        ours = model(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
        theirs = hf(**batch).logits
    assert ours.shape == (3, 24, len(labels))
    torch.testing.assert_close(theirs[real], ours[real], atol=1e-4, rtol=0)
    assert hf.config.id2label[3] == "B-LOC"


@pytest.mark.parametrize("case", sorted(CASES))
def test_qa_export_gives_our_start_and_end_logits(case) -> None:
    arch, objectives = CASES[case]
    config = TrainConfig(model=ModelConfig(**TINY, **arch), objectives=objectives)
    backbone = Backbone(config, build_model(config), tokenizer=None, source="test")
    model = jitter(QAModel.from_backbone(backbone))
    hf = to_transformers_task(model, config, ())
    assert type(hf).__name__.endswith("ForQuestionAnswering")
    batch = inputs(config.model.type_vocab_size > 0, pad_id=config.model.pad_token_id)
    with torch.no_grad():
        ours = model(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
        out = hf(**batch)
    real = batch["attention_mask"].bool()  # padding's logits are nobody's answer
    torch.testing.assert_close(out.start_logits[real], ours[..., 0][real], atol=1e-4, rtol=0)
    torch.testing.assert_close(out.end_logits[real], ours[..., 1][real], atol=1e-4, rtol=0)


@pytest.mark.parametrize("case", sorted(c for c in CASES if c != "bert-pre-ln"))
def test_choice_export_gives_our_scores(case) -> None:
    """transformers' `...ForMultipleChoice` of each family: BERT's, ALBERT's and RoBERTa's
    pooler, ELECTRA's sequence summary (dense + gelu); [B, C, L] in, [B, C] out."""
    arch, objectives = CASES[case]
    config = TrainConfig(model=ModelConfig(**TINY, **arch), objectives=objectives)
    backbone = Backbone(config, build_model(config), tokenizer=None, source="test")
    if backbone.pooler is not None:  # the pretrained sentence head's pooler, as transformers
        fresh = ChoiceModel.from_backbone(backbone)
        assert torch.equal(fresh.dense.weight, backbone.pooler.weight)
    model = jitter(ChoiceModel.from_backbone(backbone))
    options = ("A", "B", "C")
    hf = to_transformers_task(model, config, options, "race")
    assert type(hf).__name__.endswith("ForMultipleChoice")
    flat = inputs(config.model.type_vocab_size > 0, pad_id=config.model.pad_token_id)
    # Three examples of one option each become one example of three options, and back.
    batch = {k: v.roll(1, 0).unsqueeze(0).repeat(2, 1, 1) for k, v in flat.items()}
    with torch.no_grad():
        ours = model(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
        theirs = hf(**batch).logits
    assert ours.shape == (2, 3)
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=0)
    assert [hf.config.id2label[i] for i in range(3)] == list(options)
