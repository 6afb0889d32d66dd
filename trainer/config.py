"""Training configuration: typed dataclasses with the papers' defaults, and the presets.

Sizes are the BERT paper's (Devlin et al. 2019; the small sizes from Turc et al. 2019's
"Well-Read Students" table): the feed-forward width is always 4 x hidden.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from schemas.errors import UsageError
from schemas.masking import MaskingSettings


@dataclass(frozen=True)
class ModelConfig:
    family: str = "bert"
    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    max_position: int = 512
    type_vocab_size: int = 2
    dropout: float = 0.1
    attention_dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02
    # BERT as published is post-LN; pre-LN trains more stably at large learning rates.
    pre_ln: bool = False
    # Embedding rows are padded to a multiple of this for faster matmuls; logits are sliced.
    pad_vocab_to: int = 64
    pad_token_id: int = 0


@dataclass(frozen=True)
class OptimConfig:
    # BERT: Adam with lr 1e-4, beta1 0.9, beta2 0.999, L2 weight decay 0.01, 10k warmup steps,
    # then linear decay (section A.2). eps 1e-6 as in the released optimization.py.
    lr: float = 1e-4
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-6
    weight_decay: float = 0.01
    warmup_steps: int = 10_000
    grad_clip: float = 1.0


@dataclass(frozen=True)
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    masking: MaskingSettings = field(default_factory=MaskingSettings)
    objectives: tuple[str, ...] = ("mlm",)
    batch_size: int = 32
    max_steps: int = 1_000
    seed: int = 0
    save_every: int = 500
    keep: int = 3
    log_every: int = 10
    num_workers: int = 0
    shuffle_buffer: int = 8192

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        return cls(
            model=ModelConfig(**data.get("model", {})),
            optim=OptimConfig(**data.get("optim", {})),
            masking=MaskingSettings(**data.get("masking", {})),
            **{
                k: (tuple(v) if k == "objectives" else v)
                for k, v in data.items()
                if k not in ("model", "optim", "masking")
            },
        )


def _bert(layers: int, hidden: int, heads: int) -> ModelConfig:
    return ModelConfig(
        num_layers=layers, hidden_size=hidden, num_heads=heads, intermediate_size=4 * hidden
    )


MODEL_PRESETS: dict[str, ModelConfig] = {
    "bert-tiny": _bert(2, 128, 2),
    "bert-mini": _bert(4, 256, 4),
    "bert-small": _bert(4, 512, 8),
    "bert-medium": _bert(8, 512, 8),
    "bert-base": _bert(12, 768, 12),
    "bert-large": _bert(24, 1024, 16),
}


def preset(name: str) -> TrainConfig:
    """The TrainConfig of preset `name`; UsageError listing the presets otherwise."""
    if name not in MODEL_PRESETS:
        raise UsageError(f"unknown preset {name!r}; choose from {', '.join(MODEL_PRESETS)}")
    return TrainConfig(model=MODEL_PRESETS[name])


def override(config: TrainConfig, section: str, **values: Any) -> TrainConfig:
    """A copy of `config` with fields of one section (or the top level, section "") replaced."""
    if not values:
        return config
    if not section:
        return replace(config, **values)
    current = getattr(config, section)
    known = {f.name for f in fields(current)}
    unknown = set(values) - known
    if unknown:
        raise UsageError(f"unknown {section} setting(s): {', '.join(sorted(unknown))}")
    return replace(config, **{section: replace(current, **values)})
