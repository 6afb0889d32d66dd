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
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.models.bert import IGNORE_INDEX, Encoder, init_weights
from clozeworks.trainer.objectives import MLMHead, Outputs, RTDHead, classification


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

    def forward(self, batch: dict[str, torch.Tensor], seed: int = 0) -> Outputs:
        ids, attention = batch["input_ids"], batch["attention_mask"]
        types, labels = batch.get("token_type_ids"), batch["labels"]
        out: Outputs = {}
        predict = labels != IGNORE_INDEX  # [B, L]
        g = self.generator(ids, attention, types)  # [B, L, Hg]
        logits = self.mlm(g[predict])  # [N, V]
        mlm_loss = classification(out, "mlm", logits, labels[predict])

        with torch.no_grad():
            sampled = gumbel_sample(logits.detach(), seed)  # [N]
        original = torch.where(predict, labels, ids)  # [B, L]
        corrupted = original.clone()
        corrupted[predict] = sampled
        replaced = corrupted != original  # [B, L]; a sample equal to the original is "real"

        d = self.discriminator(corrupted, attention, types)  # [B, L, H]
        rtd_logits = self.rtd(d)  # [B, L]
        real = attention.bool()
        target = replaced[real].float()  # [T]
        rtd_loss = F.binary_cross_entropy_with_logits(rtd_logits[real].float(), target)
        out["rtd_loss"] = rtd_loss
        out["rtd_correct"] = ((rtd_logits[real] > 0) == replaced[real]).sum()
        out["rtd_count"] = real.sum()
        out["loss"] = mlm_loss + self.config.rtd_weight * rtd_loss
        return out
