"""ELECTRA (Clark et al. 2020): a small generator fills masked positions with plausible
tokens, and the discriminator learns to tell which tokens were replaced.

- The generator is an MLM model `generator_fraction` as wide as the discriminator (1/4 for
  small, 1/3 for base), with heads of width 64 and the same depth.
- Generator and discriminator share the embeddings (tokens, positions, types, LayerNorm);
  each projects them to its own width when the embedding is narrower.
- Loss = generator MLM + `rtd_weight` (50) x discriminator binary cross-entropy over every
  real token. No gradient flows from the discriminator into the sampling.
- Sampling uses Gumbel noise from a generator seeded by the caller (the loop passes a hash of
  seed, step, micro-batch and rank), so it holds no state and a resumed run samples exactly
  what the uninterrupted run would.

transformers: `ElectraForPreTraining` (the discriminator), and `generator/` with
`ElectraForMaskedLM`.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.schemas.validate import loads
from clozeworks.trainer.batch_index import PACKING, flat_index
from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.heads import MLMHead, Outputs, RTDHead, classification
from clozeworks.trainer.models import hf
from clozeworks.trainer.models.bert import Encoder, init_weights


def generator_config(config: ModelConfig) -> ModelConfig:
    hidden = max(1, round(config.hidden_size * config.generator_fraction))
    heads = max(1, hidden // 64)
    hidden = heads * (hidden // heads)
    return replace(config, hidden_size=hidden, num_heads=heads, intermediate_size=4 * hidden)


def gumbel_sample(logits: torch.Tensor, seed: int) -> torch.Tensor:
    """One token per row of `logits` [N, V], drawn from softmax(logits). [N] int64."""
    g = torch.Generator(device=logits.device).manual_seed(seed)
    u = torch.rand(logits.shape, generator=g, device=logits.device, dtype=torch.float32)
    noise = -torch.log(-torch.log(u.clamp(1e-9, 1.0 - 1e-7)))
    return (logits.float() + noise).argmax(-1)


class ElectraPretraining(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.discriminator = Encoder(config)
        gen = generator_config(config)
        self.generator = Encoder(gen, embeddings=self.discriminator.embeddings)
        self.mlm = MLMHead(gen, self.discriminator.embeddings.word, hidden=gen.hidden_size)
        self.rtd = RTDHead(config.hidden_size)
        self.loss_weights = {"mlm": 1.0, "rtd": config.rtd_weight}
        self.apply(partial(init_weights, std=config.initializer_range))

    @property
    def encoder(self) -> Encoder:
        """The encoder a fine-tuned model starts from: the discriminator (ELECTRA, 3.3)."""
        return self.discriminator

    def forward(self, batch: dict[str, Any], seed: int = 0) -> Outputs:
        ids, attention = batch["input_ids"], batch["attention_mask"]
        types, labels = batch.get("token_type_ids"), batch["labels"]
        packing = batch.get(PACKING)
        out: Outputs = {}
        index = flat_index(batch, "labels")  # [N]
        g = self.generator(ids, attention, types, packing)  # [B, L, Hg]
        logits = self.mlm(g.flatten(0, 1).index_select(0, index))  # [N, V]
        targets = labels.flatten().index_select(0, index)  # [N]
        mlm_loss = classification(out, "mlm", logits, targets)

        with torch.no_grad():
            sampled = gumbel_sample(logits.detach(), seed)  # [N]
        original = ids.flatten().index_copy(0, index, targets)  # [B * L]
        corrupted = original.index_copy(0, index, sampled)
        # A sample equal to the original is "real".
        replaced = (corrupted != original).view_as(ids)  # [B, L]

        d = self.discriminator(corrupted.view_as(ids), attention, types, packing)  # [B, L, H]
        rtd_logits = self.rtd(d)  # [B, L]
        real = attention.float()  # [B, L]; padding weighs nothing (no boolean index: no sync)
        count = real.sum()
        each = F.binary_cross_entropy_with_logits(
            rtd_logits.float(), replaced.float(), reduction="none"
        )  # [B, L]
        rtd_loss = (each * real).sum() / count.clamp(min=1)
        out["rtd_loss"] = rtd_loss
        out["rtd_correct"] = (((rtd_logits > 0) == replaced) & attention.bool()).sum()
        out["rtd_count"] = count
        out["loss"] = mlm_loss + self.config.rtd_weight * rtd_loss
        return out


def _encoder_weights(encoder: Encoder, m: ModelConfig) -> hf.Tensors:
    weights = {
        **hf.embeddings("electra.embeddings", encoder, m),
        **hf.bert_layers("electra.encoder", encoder),
    }
    if encoder.project is not None:
        weights.update(hf.linear("electra.embeddings_project", encoder.project))
    return weights


def _discriminator(model: Any, m: ModelConfig) -> hf.Tensors:
    return {
        **_encoder_weights(model.discriminator, m),
        **hf.linear("discriminator_predictions.dense", model.rtd.dense),
        **hf.linear("discriminator_predictions.dense_prediction", model.rtd.predict),
    }


def _generator(model: Any, gen: ModelConfig) -> hf.Tensors:
    head = model.mlm
    return {
        **_encoder_weights(model.generator, gen),
        **hf.linear("generator_predictions.dense", head.dense),
        **hf.ln("generator_predictions.LayerNorm", head.norm),
        "generator_lm_head.weight": head.decoder.weight[: gen.vocab_size],
        "generator_lm_head.bias": head.bias[: gen.vocab_size],
    }


def _config(tf: Any, m: ModelConfig, **task: Any) -> Any:
    return tf.ElectraConfig(**hf.common(m, embedding_size=m.embedding_width, **task))


def hf_weights(model: Any, m: ModelConfig) -> list[tuple[str, hf.Tensors]]:
    return [("", _discriminator(model, m)), ("generator", _generator(model, generator_config(m)))]


def to_transformers(tf: Any, model: Any, m: ModelConfig, special: dict[str, int]) -> list[Any]:
    if m.pre_ln:
        raise UsageError("transformers has no pre-LN ELECTRA; train with pre_ln = false")
    small = generator_config(m)
    disc = hf.load(tf.ElectraForPreTraining, _config(tf, m), _discriminator(model, m))
    gen = hf.load(tf.ElectraForMaskedLM, _config(tf, small), _generator(model, small))
    return [("", disc), ("generator", gen)]


def layout(m: ModelConfig) -> hf.Layout:
    return hf.Layout(
        "Electra",
        "electra",
        pooler=None,
        make_config=_config,
        activation="gelu",
        exportable=not m.pre_ln,
        summary="sequence_summary.summary",
    )


def from_transformers(config: dict[str, Any], arch: ModelConfig, path: Any) -> ModelConfig:
    generator = path / "generator" / "config.json"
    try:
        hidden = loads(generator.read_text(encoding="utf-8"))["hidden_size"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise BadInputError(f"{generator}: cannot read ({err})") from None
    return replace(
        arch,
        embedding_size=config.get("embedding_size"),
        generator_fraction=hidden / config["hidden_size"],
    )
