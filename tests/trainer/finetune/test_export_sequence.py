"""Fine-tuned sequence models load in transformers' ...ForSequenceClassification with no
missing or unexpected weights and give our logits (within 1e-4)."""

import pytest
import torch

from clozeworks.trainer.config import ModelConfig, TrainConfig
from clozeworks.trainer.finetune.export import sequence_to_transformers
from clozeworks.trainer.finetune.model import Backbone, SequenceModel
from clozeworks.trainer.models import build_model
from tests.trainer.test_export import TINY, inputs, jitter

CASES = {
    "bert": (dict(family="bert"), ("mlm", "nsp")),
    "bert-pre-ln": (dict(family="bert", pre_ln=True), ("mlm",)),
    "roberta": (dict(family="roberta", type_vocab_size=0, pad_token_id=1), ("mlm",)),
    "albert": (dict(family="albert", embedding_size=16, share="all"), ("mlm", "sop")),
    "electra": (dict(family="electra", embedding_size=16), ("mlm", "rtd")),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("labels", [("neg", "pos", "mixed"), ()])
def test_sequence_export_gives_our_logits(case, labels) -> None:
    arch, objectives = CASES[case]
    config = TrainConfig(model=ModelConfig(**TINY, **arch), objectives=objectives)
    backbone = Backbone(config, build_model(config), tokenizer=None, source="test")
    model = jitter(SequenceModel.from_backbone(backbone, max(1, len(labels))))
    if backbone.pooler is not None and model.head.family in ("bert", "albert"):
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
