"""An encoder with the heads of the chosen objectives: the pretraining model of BERT,
RoBERTa and ALBERT (ELECTRA, GPT, T5, XLNet and BART have their own in trainer/models/).

Each objective's head part (trainer/head_parts.py, named by its registry entry) builds
the module it keeps and computes its loss. The forward takes the loader's batch dict and
returns the total `loss` and, per objective NAME, `NAME_loss`, `NAME_correct` and
`NAME_count`. It reads the host's flat label indices and packing (`trainer/batch_index.py`)
when the batch carries them, so a training step has no shape that the device must report
back.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from torch import nn

from clozeworks.schemas.kinds import OBJECTIVES
from clozeworks.trainer.batch_index import PACKING, flat_index
from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.data.objective_specs import ENCODER_HEADS, OBJECTIVE_SPECS
from clozeworks.trainer.head_parts import Encoded, HeadPart, resolve
from clozeworks.trainer.heads import Outputs
from clozeworks.trainer.models.bert import Encoder, Kept, init_weights


class Pretraining(nn.Module):
    """An encoder with the heads of the chosen objectives (BERT, RoBERTa, ALBERT)."""

    def __init__(self, config: ModelConfig, encoder: Encoder, objectives: tuple[str, ...]) -> None:
        super().__init__()
        self.config = config
        self.objectives = objectives
        self.encoder = encoder
        word = encoder.embeddings.word
        # In the registry's order, MLM first (every encoder family trains it): the order
        # the modules are made and initialized in, and the losses summed in.
        named = [o for o in OBJECTIVES if o == "mlm" or o in objectives]
        self.parts: list[HeadPart] = [resolve(OBJECTIVE_SPECS[o].head) for o in named]
        for name in ENCODER_HEADS:  # a head not trained is None (export asks)
            attribute = resolve(OBJECTIVE_SPECS[name].head).attribute
            if attribute is not None:
                setattr(self, attribute, None)
        for part in self.parts:
            module = part.build(config, word)
            if module is not None and part.attribute is not None:
                setattr(self, part.attribute, module)
        sentence = [o for o in objectives if OBJECTIVE_SPECS[o].own_mode]
        self.sentence_objective = sentence[0] if sentence else None
        # A run that learns from a teacher alone (TinyBERT's stages) keeps the MLM head
        # in its graph at weight 0: every parameter then has a gradient (DDP asks).
        self.loss_weights = {o: 1.0 for o in objectives}
        if "mlm" not in objectives:
            self.loss_weights = {"mlm": 0.0, **self.loss_weights}
        # What parts read of every layer (TinyBERT's hid its states, att its scores).
        keeps = {getattr(part, "keeps", "") for part in self.parts}
        self.keep_states = bool(keeps - {""})
        self.keep_scores = "scores" in keeps
        self.apply(partial(init_weights, std=config.initializer_range))

    def forward(self, batch: dict[str, Any], seed: int = 0) -> Outputs:
        """Losses and counts for one batch; `labels` is -100 where nothing is predicted."""
        kept = None
        if self.keep_states:
            kept = Kept(range(1, self.config.num_layers + 1) if self.keep_scores else ())
        h = self.encoder(
            batch["input_ids"],
            batch["attention_mask"],
            batch.get("token_type_ids"),
            batch.get(PACKING),
            kept,
        )  # [B, L, H]
        out: Outputs = {}
        index = flat_index(batch, "labels")  # [N]
        targets = batch["labels"].flatten().index_select(0, index)  # [N]
        x = Encoded(h, h.flatten(0, 1), index, targets, batch)
        if kept is not None:
            x.cache["kept"] = kept
        loss = self.parts[0].loss(self, x, out)
        for part in self.parts[1:]:
            loss = loss + part.loss(self, x, out)
        out["loss"] = loss
        return out
