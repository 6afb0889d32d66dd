"""XLNet (Yang et al. 2019): a permutation language model with two-stream attention.

Each row comes with a factorization order (`perm_order`, from the loader: -1 for context
tokens, which every position sees and which see no target; else the token's place in a
random order) and the positions it predicts (`plm_positions`, the last 1/K of the order,
K = 6). Two streams run through the same layers:

- the content stream h (one state per token, as a Transformer's) attends to what comes
  before a token in the order, and to the token itself;
- the query stream g (one state per predicted position, starting from a learned `mask_emb`)
  attends to what comes before its position in the order but not to its own token, which
  it predicts; it reads positions only through relative attention.

Attention is Transformer-XL's relative attention: content (ac), position (bd: sinusoidal
encodings of the distance i - j, projected by `r`) and segment (ef: same segment or not)
terms, each with its own learned bias per head, scaled by 1/sqrt(d). Layers are post-LN
with an exact-GELU feed-forward; the output layer is tied to the word embedding.
Parameters are laid out as transformers' `XLNetLMHeadModel` keeps them ([d, heads, d_head]
projections), so `hf_weights` below copies them as they are.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from clozeworks.trainer.batch_index import flat_index
from clozeworks.trainer.config import ModelConfig
from clozeworks.trainer.heads import Outputs, classification
from clozeworks.trainer.models import hf
from clozeworks.trainer.models.bert import LayerStack, padded_vocab
from clozeworks.trainer.models.gpt import normal_init

ORDER, POSITIONS, PLM_STATS = "perm_order", "plm_positions", "plm_stats"
_BLOCKED = 1e30  # subtracted from a blocked logit, as XLNet does in fp32


def permutation_masks(batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """XLNet's `perm_mask` [B, L, L] (True: i may not attend to j), `target_mapping`
    [B, P, L] (one-hot rows of the predicted positions; zero rows for padding) and the
    targets as a [B, L] bool, from the loader's `perm_order` and `plm_positions`."""
    order, positions = batch[ORDER], batch[POSITIONS]  # [B, L], [B, P]
    length = order.shape[1]
    valid = positions >= 0  # [B, P]
    mapping = F.one_hot(positions.clamp(min=0), length) * valid[..., None]  # [B, P, L]
    target = mapping.sum(1) > 0  # [B, L]
    # A target may not see itself; every other position sees its own token.
    own = torch.where(target, order, order + 1)  # [B, L]
    perm = (own[:, :, None] <= order[:, None, :]) & (order[:, None, :] >= 0)  # [B, L, L]
    return perm, mapping, target


def sinusoid(length: int, width: int, device: torch.device) -> torch.Tensor:
    """Encodings of the distances L, L-1, ..., -L+1 (key j of query i is at i - j). [2L, d]"""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, width, 2.0, device=device) / width))
    distance = torch.arange(length, -length, -1.0, device=device)  # [2L]
    angles = distance[:, None] * inv_freq[None, :]  # [2L, d/2]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)  # [2L, d]


class RelativeAttention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d, n, dh = config.hidden_size, config.num_heads, config.head_width
        self.q = nn.Parameter(torch.empty(d, n, dh))
        self.k = nn.Parameter(torch.empty(d, n, dh))
        self.v = nn.Parameter(torch.empty(d, n, dh))
        self.o = nn.Parameter(torch.empty(d, n, dh))
        self.r = nn.Parameter(torch.empty(d, n, dh))
        self.r_w_bias = nn.Parameter(torch.empty(n, dh))  # content
        self.r_r_bias = nn.Parameter(torch.empty(n, dh))  # position
        self.r_s_bias = nn.Parameter(torch.empty(n, dh))  # segment
        self.seg_embed = nn.Parameter(torch.empty(2, n, dh))  # same segment, other segment
        self.layer_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        self.scale = dh**-0.5

    def core(
        self,
        q: torch.Tensor,
        where: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        kr: torch.Tensor,
        other_segment: torch.Tensor,
        blocked: torch.Tensor,
    ) -> torch.Tensor:
        """Queries q [B, P, n, dh] at positions `where` [B, P] over keys k, v [B, L, n, dh];
        kr [2L, n, dh] the projected distance encodings; other_segment, blocked [B, P, L]."""
        length = k.shape[1]
        ac = torch.einsum("bpnd,blnd->bnpl", q + self.r_w_bias, k)  # [B, n, P, L]
        every = torch.einsum("bpnd,knd->bnpk", q + self.r_r_bias, kr)  # [B, n, P, 2L]
        # Key j of a query at i is at distance i - j: row L - i + j of the encodings.
        rows = length - where[:, None, :, None] + torch.arange(length, device=q.device)
        bd = every.gather(3, rows.expand(-1, every.shape[1], -1, -1))  # [B, n, P, L]
        both = torch.einsum("bpnd,snd->bnps", q + self.r_s_bias, self.seg_embed)  # [B, n, P, 2]
        ef = torch.where(other_segment[:, None], both[..., 1:], both[..., :1])  # [B, n, P, L]
        score = (ac + bd + ef) * self.scale
        score = score.float() - _BLOCKED * blocked[:, None].float()
        prob = self.dropout(F.softmax(score, dim=-1).to(v.dtype))  # [B, n, P, L]
        return torch.einsum("bnpl,blnd->bpnd", prob, v)  # [B, P, n, dh]

    def post(self, x: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
        out = torch.einsum("bpnd,hnd->bph", vec, self.o)  # [B, P, d]
        return self.layer_norm(self.dropout(out) + x)


class FeedForward(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.layer_1 = nn.Linear(config.hidden_size, config.intermediate_size)
        self.layer_2 = nn.Linear(config.intermediate_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dropout(F.gelu(self.layer_1(x)))  # [B, L, F]
        return self.layer_norm(self.dropout(self.layer_2(h)) + x)


class Layer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.rel_attn = RelativeAttention(config)
        self.ff = FeedForward(config)

    def forward(
        self,
        h: torch.Tensor,
        g: torch.Tensor,
        r: torch.Tensor,
        streams: tuple[torch.Tensor, ...],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """h [B, L, d] content, g [B, P, d] query stream, r [2L, d] distance encodings."""
        at, where, other_h, blocked_h, other_g, blocked_g = streams
        a = self.rel_attn
        k = torch.einsum("blh,hnd->blnd", h, a.k)  # [B, L, n, dh]
        v = torch.einsum("blh,hnd->blnd", h, a.v)
        kr = torch.einsum("kh,hnd->knd", r, a.r)  # [2L, n, dh]
        q_h = torch.einsum("blh,hnd->blnd", h, a.q)
        h_next = a.post(h, a.core(q_h, at, k, v, kr, other_h, blocked_h))  # [B, L, d]
        q_g = torch.einsum("bph,hnd->bpnd", g, a.q)
        g_next = a.post(g, a.core(q_g, where, k, v, kr, other_g, blocked_g))  # [B, P, d]
        return self.ff(h_next), self.ff(g_next)


class XLNet(LayerStack):
    """Two-stream encoder and tied output layer; forward(batch) -> the `plm` loss."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        d = config.hidden_size
        self.word_embedding = nn.Embedding(padded_vocab(config), d)
        self.mask_emb = nn.Parameter(torch.empty(1, 1, d))
        self.layer = nn.ModuleList(Layer(config) for _ in range(config.num_layers))
        self.dropout = nn.Dropout(config.dropout)
        self.lm_bias = nn.Parameter(torch.zeros(padded_vocab(config)))
        self.loss_weights = {"plm": 1.0}
        self.apply(self._init)

    def _init(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        normal_init(module, std)
        if isinstance(module, RelativeAttention):
            for p in (module.q, module.k, module.v, module.o, module.r, module.seg_embed):
                nn.init.normal_(p, std=std)
            for p in (module.r_w_bias, module.r_r_bias, module.r_s_bias):
                nn.init.normal_(p, std=std)
        elif module is self:
            nn.init.normal_(self.mask_emb, std=std)

    def streams(self, batch: dict[str, Any]) -> tuple[torch.Tensor, ...]:
        """Positions, segment differences and blocked pairs of both streams."""
        ids = batch["input_ids"]
        b, length = ids.shape
        perm, _, _ = permutation_masks(batch)  # [B, L, L]
        pad = ~batch["attention_mask"].bool()  # [B, L]
        types = batch.get("token_type_ids")
        types = torch.zeros_like(ids) if types is None else types
        other = types[:, :, None] != types[:, None, :]  # [B, L, L]
        eye = torch.eye(length, dtype=torch.int64, device=ids.device)
        # XLNet's non_tgt_mask: the content stream always sees its own token.
        blocked_h = (pad[:, None, :].long() + perm.long() - eye) > 0  # [B, L, L]
        where = batch[POSITIONS].clamp(min=0)  # [B, P]
        rows = where[:, :, None].expand(-1, -1, length)
        blocked_g = pad[:, None, :] | perm.gather(1, rows)  # [B, P, L]
        at = torch.arange(length, device=ids.device).expand(b, length)
        return at, where, other, blocked_h, other.gather(1, rows), blocked_g

    def hidden(self, batch: dict[str, Any]) -> torch.Tensor:
        """The query stream's last states [B, P, d]."""
        ids = batch["input_ids"]
        b, length = ids.shape
        h = self.dropout(self.word_embedding(ids))  # [B, L, d]
        g = self.dropout(self.mask_emb.expand(b, batch[POSITIONS].shape[1], -1))  # [B, P, d]
        r = self.dropout(sinusoid(length, self.config.hidden_size, ids.device).to(h.dtype))
        streams = self.streams(batch)
        recompute = self.checkpointing and self.training and torch.is_grad_enabled()
        for layer in self.layer:
            if recompute:
                h, g = torch.utils.checkpoint.checkpoint(
                    layer, h, g, r, streams, use_reentrant=False
                )
            else:
                h, g = layer(h, g, r, streams)
        return self.dropout(g)

    def logits(self, g: torch.Tensor) -> torch.Tensor:
        out = F.linear(g, self.word_embedding.weight, self.lm_bias)  # [..., V_padded]
        return out[..., : self.config.vocab_size]

    def forward(self, batch: dict[str, Any], seed: int = 0) -> Outputs:
        g = self.hidden(batch).flatten(0, 1)  # [B * P, d]
        index = flat_index(batch, "labels")  # [N]
        targets = batch["labels"].flatten().index_select(0, index)  # [N]
        out: Outputs = {}
        out["loss"] = classification(out, "plm", self.logits(g.index_select(0, index)), targets)
        if PLM_STATS in batch:  # predicted / predictable tokens: XLNet's 1 / K
            predicted, predictable = batch[PLM_STATS].sum(0)
            out["plm_predicted_share_num"], out["plm_predicted_share_den"] = predicted, predictable
        return out


# transformers' XLNetLMHeadModel: bos / eos are the tokenizer's [CLS] / [SEP].


def _config(tf: Any, m: ModelConfig, special: dict[str, int]) -> Any:
    return tf.XLNetConfig(
        vocab_size=m.vocab_size,
        d_model=m.hidden_size,
        n_layer=m.num_layers,
        n_head=m.num_heads,
        d_inner=m.intermediate_size,
        ff_activation="gelu",
        untie_r=True,
        attn_type="bi",
        initializer_range=m.initializer_range,
        layer_norm_eps=m.layer_norm_eps,
        dropout=m.dropout,
        mem_len=None,
        reuse_len=None,
        bi_data=False,
        clamp_len=-1,
        same_length=False,
        pad_token_id=special.get("pad", m.pad_token_id),
        bos_token_id=special.get("cls"),
        eos_token_id=special.get("sep"),
    )


def _weights(model: Any, m: ModelConfig) -> hf.Tensors:
    word = model.word_embedding.weight[: m.vocab_size]
    out: hf.Tensors = {
        "transformer.word_embedding.weight": word,
        "transformer.mask_emb": model.mask_emb,
        "lm_loss.weight": word,
        "lm_loss.bias": model.lm_bias[: m.vocab_size],
    }
    names = ("q", "k", "v", "o", "r", "r_r_bias", "r_s_bias", "r_w_bias", "seg_embed")
    for i, layer in enumerate(model.layer):
        p = f"transformer.layer.{i}"
        for name in names:
            out[f"{p}.rel_attn.{name}"] = getattr(layer.rel_attn, name)
        for part, module in (("rel_attn", layer.rel_attn), ("ff", layer.ff)):
            out[f"{p}.{part}.layer_norm.weight"] = module.layer_norm.weight
            out[f"{p}.{part}.layer_norm.bias"] = module.layer_norm.bias
        for name in ("layer_1", "layer_2"):
            out[f"{p}.ff.{name}.weight"] = getattr(layer.ff, name).weight
            out[f"{p}.ff.{name}.bias"] = getattr(layer.ff, name).bias
    return out


def hf_weights(model: Any, m: ModelConfig) -> list[tuple[str, hf.Tensors]]:
    return [("", _weights(model, m))]


def to_transformers(tf: Any, model: Any, m: ModelConfig, special: dict[str, int]) -> list[Any]:
    config = _config(tf, m, special)
    return [("", hf.load(tf.XLNetLMHeadModel, config, _weights(model, m)))]
