"""Training configuration: typed dataclasses with the papers' defaults, and the presets.

Each section is the table of the same name in a config file; the presets (model sizes) are
in trainer/presets.py, each family's optimizer and masking in its registry entry
(trainer/families.py).

A config file (TOML or JSON) overrides any field: top-level keys, and the tables `[model]`,
`[optim]`, `[masking]` and `[phase2]`.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from clozeworks.corpus.shards.cache import DEFAULT_LIMIT
from clozeworks.schemas.errors import BadInputError, SettingError, UsageError
from clozeworks.schemas.kinds import FAMILIES, OBJECTIVES, ON_ERROR, PRECISIONS
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.schemas.settings import DEFAULT_SEED, SEED_MAX
from clozeworks.schemas.validate import loads
from clozeworks.trainer.tracking import check_trackers, parse_trackers

# Sequences a loader stream shuffles among (the loader's default too).
SHUFFLE_BUFFER = 8192
# The largest share of the training shards that may be held out.
MAX_EVAL_SPLIT = 0.5

SHARING = ("none", "all", "attention", "ffn")

_MODEL_COUNTS = (
    "vocab_size",
    "hidden_size",
    "num_layers",
    "num_heads",
    "intermediate_size",
    "max_position",
    "pad_vocab_to",
    "sbo_max_span",
    "relative_buckets",
    "relative_max_distance",
)
_TRAIN_COUNTS = (
    "batch_size",
    "grad_accum",
    "max_steps",
    "save_every",
    "log_every",
    "keep",
    "shuffle_buffer",
    "eval_batches",
)
_TYPES: dict[str, type | tuple[type, ...]] = {
    "int": int,
    "float": (int, float),
    "bool": bool,
    "str": str,
}


def _check_types(obj: Any, section: str) -> None:
    """Each scalar field holds its annotated type, so a TOML slip (`hidden_size = "768"`,
    `dropout = true`) is named here rather than failing deep inside the model."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        kinds = [k.strip() for k in str(f.type).split("|")]
        if value is None and "None" in kinds:
            continue
        expected = _TYPES.get(kinds[0])
        if expected is None:
            continue
        if not isinstance(value, expected) or (isinstance(value, bool) and kinds[0] != "bool"):
            raise UsageError(f"{_name(section, f.name)} must be {kinds[0]}, got {value!r}")


def _name(section: str, name: str) -> str:
    return f"{section}.{name}" if section else name


def _at_least(obj: Any, section: str, name: str, minimum: int) -> None:
    value = getattr(obj, name)
    if value < minimum:
        raise SettingError(_name(section, name), f"must be >= {minimum}, got {value}")


def _between(
    obj: Any,
    section: str,
    name: str,
    low: float,
    high: float,
    low_open: bool = False,
    high_open: bool = False,
) -> None:
    """`low <= value <= high` (strict on an open side); NaN is never in range."""
    value = getattr(obj, name)
    above = value > low if low_open else value >= low
    below = value < high if high_open else value <= high
    if not (above and below):
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise SettingError(_name(section, name), f"must be in {interval}, got {value}")


@dataclass(frozen=True)
class ModelConfig:
    family: str = "bert"
    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    max_position: int = 512
    # 0 = no token-type embedding at all (RoBERTa dropped segment embeddings with NSP).
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
    # Factorized embedding (ALBERT, ELECTRA): embeddings of this width, projected to hidden.
    # None = hidden_size.
    embedding_size: int | None = None
    # ALBERT's cross-layer parameter sharing (section 3.1, table 4).
    share: str = "none"
    # ELECTRA: the generator is this fraction of the discriminator's width (section 3.2:
    # 1/4 to 1/2 works best) and the discriminator's loss is weighted by `rtd_weight` (50).
    generator_fraction: float = 0.25
    rtd_weight: float = 50.0
    # SpanBERT's span boundary objective: relative positions inside a span up to this.
    sbo_max_span: int = 32
    # Width of one attention head; None = hidden_size / num_heads. T5 v1.1 small has 6
    # heads of 64 at d_model 512.
    head_size: int | None = None
    # T5: decoder depth (None = num_layers) and its relative position buckets (Raffel et
    # al. 2020, section 2.1: 32 buckets, logarithmic up to a distance of 128).
    decoder_layers: int | None = None
    relative_buckets: int = 32
    relative_max_distance: int = 128

    def __post_init__(self) -> None:
        _check_types(self, "model")
        for name in _MODEL_COUNTS:
            _at_least(self, "model", name, 1)
        _at_least(self, "model", "type_vocab_size", 0)
        _at_least(self, "model", "pad_token_id", 0)
        for name in ("embedding_size", "head_size", "decoder_layers"):
            if getattr(self, name) is not None:
                _at_least(self, "model", name, 1)
        _between(self, "model", "dropout", 0.0, 1.0, high_open=True)
        _between(self, "model", "attention_dropout", 0.0, 1.0, high_open=True)
        _between(self, "model", "layer_norm_eps", 0.0, math.inf, low_open=True, high_open=True)
        _between(self, "model", "initializer_range", 0.0, math.inf, low_open=True, high_open=True)
        _between(self, "model", "rtd_weight", 0.0, math.inf, high_open=True)
        if self.family not in FAMILIES:
            raise UsageError(f"model family {self.family!r} is not one of {', '.join(FAMILIES)}")
        if self.share not in SHARING:
            raise UsageError(f"model.share {self.share!r} is not one of {', '.join(SHARING)}")
        if self.head_size is None and self.hidden_size % self.num_heads:
            raise UsageError(
                f"hidden_size {self.hidden_size} is not a multiple of num_heads {self.num_heads}"
            )
        if not 0.0 < self.generator_fraction <= 1.0:
            raise UsageError(f"generator_fraction must be in (0, 1], got {self.generator_fraction}")

    @property
    def embedding_width(self) -> int:
        return self.embedding_size or self.hidden_size

    @property
    def head_width(self) -> int:
        return self.head_size or self.hidden_size // self.num_heads

    @property
    def decoder_depth(self) -> int:
        return self.decoder_layers or self.num_layers


@dataclass(frozen=True)
class OptimConfig:
    # BERT: Adam with lr 1e-4, beta1 0.9, beta2 0.999, L2 weight decay 0.01, 10k warmup steps,
    # then linear decay (section A.2). eps 1e-6 as in the released optimization.py.
    name: str = "adamw"
    lr: float = 1e-4
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-6
    weight_decay: float = 0.01
    warmup_steps: int = 10_000
    grad_clip: float = 1.0
    # Steps over which the rate decays to zero; None = the run's max_steps.
    decay_steps: int | None = None
    # Warm-up as a share of those steps (RoBERTa fine-tuning's 0.06), instead of
    # warmup_steps when set: a preset's step count is its paper's, for a run of its length.
    warmup_ratio: float | None = None
    # Train even when the warm-up is as long as the run (the rate never reaches its peak).
    force_warmup: bool = False

    def __post_init__(self) -> None:
        _check_types(self, "optim")
        if self.name not in ("adamw", "lamb"):
            raise UsageError(f"optim.name {self.name!r} is not one of adamw, lamb")
        _between(self, "optim", "lr", 0.0, math.inf, low_open=True, high_open=True)
        _between(self, "optim", "beta1", 0.0, 1.0, high_open=True)
        _between(self, "optim", "beta2", 0.0, 1.0, high_open=True)
        _between(self, "optim", "eps", 0.0, math.inf, low_open=True, high_open=True)
        _between(self, "optim", "weight_decay", 0.0, math.inf, high_open=True)
        _between(self, "optim", "grad_clip", 0.0, math.inf, high_open=True)  # 0: no clipping
        _at_least(self, "optim", "warmup_steps", 0)
        if self.decay_steps is not None:
            _at_least(self, "optim", "decay_steps", 1)
        if self.warmup_ratio is not None:
            _between(self, "optim", "warmup_ratio", 0.0, 1.0, high_open=True)


@dataclass(frozen=True)
class Phase2Config:
    """BERT's second phase: from `start_step` on, read `data` (length 512) at `batch_size`."""

    data: str
    start_step: int
    batch_size: int | None = None


@dataclass(frozen=True)
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    masking: MaskingSettings = field(default_factory=MaskingSettings)
    objectives: tuple[str, ...] = ("mlm",)
    batch_size: int = 32
    # Micro-batches per optimizer step; the global batch is batch_size x grad_accum x ranks.
    grad_accum: int = 1
    max_steps: int = 1_000
    seed: int = DEFAULT_SEED
    save_every: int = 500
    keep: int = 3
    log_every: int = 10
    num_workers: int = 0
    shuffle_buffer: int = SHUFFLE_BUFFER
    # Check each shard's sha256 before its first use; on a damaged shard "raise" or "skip"
    # (skipping is logged once per shard, see trainer.data.loader).
    verify_shards: bool = False
    on_error: str = "raise"
    # Remote shards (https://, s3://, gs://, pipe:) are downloaded whole into this cache
    # (default: $CLOZEWORKS_CACHE or ~/.cache/clozeworks), least recently used evicted past
    # shard_cache_gb, so later epochs and resumed runs read them from local disk.
    shard_cache: str | None = None
    shard_cache_gb: float = DEFAULT_LIMIT / 1e9
    # Several shard sets mixed by weight, {source: weight} (TOML: a [mixture] table;
    # the command line: --data a=0.6,b=0.4); each micro-batch comes from one set.
    mixture: dict[str, float] | None = None
    # Held-out evaluation on a separate shard set every `eval_every` steps (0: at the end).
    eval_data: str | None = None
    # Or hold out this share of the training shards (run_mlm.py's validation split): the
    # same sequences on every rank count and resume, never trained on (0: none).
    eval_split: float = 0.0
    eval_every: int = 0
    eval_batches: int = 50
    phase2: Phase2Config | None = None
    # Start from these weights (a transformers directory, a run, or a step directory)
    # with a fresh optimizer; the architecture comes from them (trainer/init_from.py).
    init_from: str | None = None
    device: str = "auto"
    # "auto": bf16 autocast on GPU, fp32 on CPU (trainer/precision.py); fp16 with a dynamic
    # loss scale for GPUs without bf16.
    precision: str = "auto"
    compile: bool = False
    # GPU kernels that sum with atomics (embedding and scatter backward) round in a
    # different order on every run; this picks deterministic ones (somewhat slower) so a
    # resumed run ends bit-identical on a GPU too, as it always does on the CPU.
    deterministic: bool = False
    # Run the encoder on the real tokens only when a batch has padding (token-wise layers on
    # [T, H], attention over variable-length rows): the same outputs, less work.
    unpad: bool = True
    # Recompute each encoder layer in the backward pass instead of keeping its activations
    # (bert-large and roberta-large at long sequences fit where they otherwise do not).
    grad_checkpointing: bool = False
    # Under torchrun: shard parameters, gradients and optimizer state over the ranks (FSDP2)
    # instead of DDP's whole copy per rank (trainer/fsdp.py).
    fsdp: bool = False
    # Trackers beside metrics.jsonl (trainer/tracking.py); None: TensorBoard when installed,
    # settled before the run (config.json says which).
    report_to: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        unknown = [o for o in self.objectives if o not in OBJECTIVES]
        if unknown:
            raise UsageError(
                f"unknown objective(s) {', '.join(unknown)}; choose from {', '.join(OBJECTIVES)}"
            )
        _check_types(self, "")
        for name in _TRAIN_COUNTS:
            _at_least(self, "", name, 1)
        _at_least(self, "", "num_workers", 0)
        _at_least(self, "", "eval_every", 0)
        _between(self, "", "shard_cache_gb", 0.0, float("inf"), high_open=True)
        # torch seeds with a signed 64-bit integer and numpy with a non-negative one.
        if not 0 <= self.seed <= SEED_MAX:
            raise SettingError("seed", f"must be in [0, 2**63 - 1], got {self.seed}")
        _between(self, "", "eval_split", 0.0, MAX_EVAL_SPLIT)
        if self.mixture is not None:
            bad = [
                k
                for k, v in self.mixture.items()
                if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0
            ]
            if not self.mixture or bad:
                raise UsageError(f"mixture weights must be numbers above 0: {bad or 'none'}")
            if self.eval_split:
                raise UsageError("eval_split with a mixture: pass eval_data (a held-out set)")
        if self.eval_split and self.eval_data:
            raise UsageError("eval_data and eval_split both name a held-out set; pass one")
        if self.on_error not in ON_ERROR:
            raise UsageError(f"on_error {self.on_error!r} is not one of {', '.join(ON_ERROR)}")
        if self.report_to is not None:
            check_trackers(self.report_to)
        if self.precision not in PRECISIONS:
            raise SettingError("precision", f"must be one of {', '.join(PRECISIONS)}")
        if self.precision == "fp16" and self.fsdp:
            # FSDP's sharded gradients need a sharded scaler; bf16 needs none.
            raise SettingError("precision", "fp16 with --fsdp is not supported; use bf16")

    def to_dict(self) -> dict[str, Any]:
        """Every setting the run uses; a warm-up in steps is left out when a share of the
        run (warmup_ratio) replaces it, so config.json never shows a value that did not
        apply (loading it gives the same run: the ratio wins either way)."""
        out = asdict(self)
        if self.optim.warmup_ratio is not None:
            del out["optim"]["warmup_steps"]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        return merge(cls(), data, "config")


_SECTIONS = {"model": ModelConfig, "optim": OptimConfig, "masking": MaskingSettings}


# `merge`'s source for settings given as flags.
COMMAND_LINE = "command line"


def merge(config: TrainConfig, data: dict[str, Any], source: str) -> TrainConfig:
    """`config` with every field `data` names replaced; UsageError names an unknown one."""
    top = {f.name for f in fields(TrainConfig)}
    changes: dict[str, Any] = {}
    for key, value in data.items():
        if key in _SECTIONS:
            if not isinstance(value, dict):
                raise UsageError(f"{source}: [{key}] must be a table")
            section = getattr(config, key)
            known = {f.name for f in fields(section)}
            bad = sorted(set(value) - known)
            if bad:
                raise UsageError(f"{source}: unknown {key} setting(s): {', '.join(bad)}")
            try:
                changes[key] = replace(section, **value)
            except SettingError as err:
                if source == COMMAND_LINE:
                    raise
                raise UsageError(f"{source}: {err}") from None
            except UsageError as err:
                raise UsageError(f"{source}: {err}") from None
            except (TypeError, ValueError) as err:
                raise UsageError(f"{source}: [{key}]: {err}") from None
        elif key == "phase2":
            changes[key] = None if value is None else _phase2(value, source)
        elif key == "tensorboard" and isinstance(value, bool):
            # The switch before --report-to, still read from older config files.
            changes["report_to"] = ("tensorboard",) if value else ()
        elif key in top:
            if isinstance(value, str) and key == "report_to":
                try:
                    value = parse_trackers(value)
                except ValueError as err:
                    raise UsageError(f"{source}: {err}") from None
            elif isinstance(value, str) and key == "objectives":
                value = [v.strip() for v in value.split(",") if v.strip()]
            listed = key in ("objectives", "report_to") and value is not None
            changes[key] = tuple(value) if listed else value
        else:
            raise UsageError(f"{source}: unknown setting {key!r}")
    try:
        return replace(config, **changes)
    except SettingError as err:
        if source == COMMAND_LINE:
            raise  # the command line names the setting by the flag the user typed
        raise UsageError(f"{source}: {err}") from None
    except UsageError as err:
        raise UsageError(f"{source}: {err}") from None


def _phase2(value: Any, source: str) -> Phase2Config:
    if isinstance(value, Phase2Config):
        return value
    if not isinstance(value, dict):
        raise UsageError(f"{source}: [phase2] must be a table with data and start_step")
    try:
        return Phase2Config(**value)
    except TypeError as err:
        raise UsageError(f"{source}: [phase2]: {err}") from None


def settings_from_pairs(pairs: Sequence[str], source: str) -> dict[str, Any]:
    """`KEY=VALUE` pairs as the TOML file would give them, for `merge`: KEY dotted into a
    section (`model.hidden_size`), VALUE a TOML value, or a bare word taken as a string."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, eq, text = pair.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"{source} {pair!r}: expected KEY=VALUE")
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text  # a bare word: a string, as `model.family=albert`
        *sections, name = key.strip().split(".")
        target = out
        for section in sections:
            target = target.setdefault(section, {})
            if not isinstance(target, dict):
                raise UsageError(f"{source} {pair!r}: {section} is not a section")
        target[name] = value
    return out


def load_config_file(path: Path, base: TrainConfig) -> TrainConfig:
    """`base` overridden by a TOML (`.toml`) or JSON file; BadInputError names the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise BadInputError(f"{path}: cannot read config ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise BadInputError(f"{path}: not UTF-8 text ({err})") from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as err:
        raise BadInputError(f"{path}: not valid {path.suffix[1:] or 'JSON'} ({err})") from None
    if not isinstance(data, dict):
        raise BadInputError(f"{path}: expected a table of settings")
    # A run's own config.json names its data and describes it; those keys are not settings.
    data = {k: v for k, v in data.items() if k not in RUN_RECORD_KEYS}
    return merge(base, data, str(path))


# What a run's config.json holds beside the settings: the data it was given, what that data
# is (a line per phase's shard set), the run's copy of the tokenizer.
RUN_RECORD_KEYS = ("data", "data_summary", "tokenizer")


def override(config: TrainConfig, section: str, **values: Any) -> TrainConfig:
    """A copy of `config` with fields of one section (or the top level, section "") replaced."""
    if not values:
        return config
    if not section:
        return merge(config, values, "override")
    return merge(config, {section: values}, "override")
