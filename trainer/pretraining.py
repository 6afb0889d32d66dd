"""An encoder with the heads of the chosen objectives: the pretraining model of BERT,
RoBERTa and ALBERT (ELECTRA, GPT, T5 and XLNet have their own in trainer/models/).

Its forward takes the loader's batch dict and returns the total `loss` and, per objective
NAME, `NAME_loss`, `NAME_correct` and `NAME_count`. It reads the host's flat label indices
and packing (`trainer/batch_index.py`) when the batch carries them, so a training step has
no shape that the device must report back.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from torch import nn

from clozeworks.schemas.kinds import SENTENCE_OBJECTIVES
from clozeworks.trainer.batch_index import PACKING, WSO_LABELS, flat_index
from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.heads import (
    SENTENCE_CLASSES,
    SENTENCE_LABEL_KEYS,
    MLMHead,
    Outputs,
    SentenceHead,
    SpanBoundaryHead,
    classification,
)
from clozeworks.trainer.models.bert import Encoder, init_weights


class Pretraining(nn.Module):
    """An encoder with the heads of the chosen objectives (BERT, RoBERTa, ALBERT)."""

    def __init__(self, config: ModelConfig, encoder: Encoder, objectives: tuple[str, ...]) -> None:
        super().__init__()
        self.config = config
        self.objectives = objectives
        self.encoder = encoder
        word = encoder.embeddings.word
        self.mlm = MLMHead(config, word)
        sentence = [o for o in objectives if o in SENTENCE_OBJECTIVES]
        self.sentence_objective = sentence[0] if sentence else None
        self.sentence = (
            SentenceHead(config.hidden_size, SENTENCE_CLASSES[sentence[0]]) if sentence else None
        )
        self.sbo = SpanBoundaryHead(config, word) if "sbo" in objectives else None
        self.loss_weights = {o: 1.0 for o in objectives}
        self.apply(partial(init_weights, std=config.initializer_range))

    def forward(self, batch: dict[str, Any], seed: int = 0) -> Outputs:
        """Losses and counts for one batch; `labels` is -100 where nothing is predicted."""
        h = self.encoder(
            batch["input_ids"],
            batch["attention_mask"],
            batch.get("token_type_ids"),
            batch.get(PACKING),
        )  # [B, L, H]
        out: Outputs = {}
        index = flat_index(batch, "labels")  # [N]
        flat = h.flatten(0, 1)  # [B * L, H]
        targets = batch["labels"].flatten().index_select(0, index)  # [N]
        loss = classification(out, "mlm", self.mlm(flat.index_select(0, index)), targets)
        if self.sentence is not None and self.sentence_objective is not None:
            key = SENTENCE_LABEL_KEYS[self.sentence_objective]
            logits = self.sentence(h)  # [B, C]
            loss = loss + classification(out, self.sentence_objective, logits, batch[key])
        if self.sbo is not None:
            logits = self.sbo(h, index, batch)
            loss = loss + classification(out, "sbo", logits, targets)
        if "wso" in self.objectives:
            shuffled = flat_index(batch, WSO_LABELS)  # [S]
            wso = batch[WSO_LABELS].flatten().index_select(0, shuffled)
            loss = loss + classification(out, "wso", self.mlm(flat.index_select(0, shuffled)), wso)
        out["loss"] = loss
        return out
