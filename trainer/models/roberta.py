"""RoBERTa (Liu et al. 2019): BERT's architecture without token-type embeddings.

What makes RoBERTa is mostly not the network: no NSP (train with `mlm` only on
`full-sentences` or `doc-sentences` shards), dynamic masking (the loader's default), a
byte-level BPE vocabulary, and Adam with beta2 0.98 (the `roberta-*` presets). The encoder
is BERT's with `type_vocab_size` 0. transformers: `RobertaForMaskedLM` (pre-LN:
`RobertaPreLayerNormForMaskedLM`), positions numbered from `pad_token_id + 1`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.models import hf
from clozeworks.trainer.models.bert import Encoder


def build_encoder(config: ModelConfig) -> Encoder:
    return Encoder(replace(config, type_vocab_size=0))  # [B, L] -> [B, L, H]


def hf_weights(model: Any, m: ModelConfig) -> list[tuple[str, hf.Tensors]]:
    return [("", hf.roberta_weights(model, m, prelayernorm=m.pre_ln))]


def to_transformers(tf: Any, model: Any, m: ModelConfig, special: dict[str, int]) -> list[Any]:
    return [("", hf.roberta_model(tf, model, m, prelayernorm=m.pre_ln))]


def layout(m: ModelConfig) -> hf.Layout:
    if m.pre_ln:
        return hf.PRE_LN
    return hf.Layout("Roberta", "roberta", pooler=None, make_config=hf.roberta_config)


def from_transformers(config: dict[str, Any], arch: ModelConfig, path: Any) -> ModelConfig:
    # Positions counted from pad_token_id + 1 (pre-LN ones are already), no token types.
    offset = 0 if arch.pre_ln else config.get("pad_token_id", 1) + 1
    return replace(arch, max_position=arch.max_position - offset, type_vocab_size=0)
