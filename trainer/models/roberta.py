"""RoBERTa (Liu et al. 2019): BERT's architecture without token-type embeddings.

What makes RoBERTa is mostly not the network: no NSP (train with `mlm` only on
`full-sentences` or `doc-sentences` shards), dynamic masking (the loader's default), a
byte-level BPE vocabulary, and Adam with beta2 0.98 (the `roberta-*` presets). The encoder
is BERT's with `type_vocab_size` 0.
"""

from __future__ import annotations

from dataclasses import replace

from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.models.bert import Encoder


def build_encoder(config: ModelConfig) -> Encoder:
    return Encoder(replace(config, type_vocab_size=0))  # [B, L] -> [B, L, H]
