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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from clozeworks.corpus.shards.cache import DEFAULT_LIMIT
from clozeworks.schemas.errors import SettingError, UsageError
from clozeworks.schemas.kinds import (
    OBJECTIVES,
    Device,
    FamilyName,
    Objective,
    OnError,
    OptimName,
    Precision,
    Share,
)
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.schemas.overlay import checked, read_table
from clozeworks.schemas.settings import DEFAULT_SEED, SEEDS, check_choices, setting, settings_of
from clozeworks.trainer.tracking import TRACKERS, check_trackers, parse_trackers

# Sequences a loader stream shuffles among (the loader's default too).
SHUFFLE_BUFFER = 8192
# The largest share of the training shards that may be held out.
MAX_EVAL_SPLIT = 0.5
_POSITIVE = {"bounds": (0.0, math.inf), "open_ends": "both"}
_SHARE_BELOW_ONE = {"bounds": (0.0, 1.0), "open_ends": "high"}


def parse_share(text: str, what: str = "a share") -> float:
    """A share as a number or a percentage: "0.005" or "0.5%" -> 0.005."""
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ValueError(f"not {what}: {text!r}") from None


def _objectives(text: str) -> tuple[str, ...]:
    """`mlm,nsp` -> ("mlm", "nsp"); each checked against kinds.Objective by the config."""
    return tuple(o.strip() for o in text.split(",") if o.strip())


@dataclass(frozen=True)
class ModelConfig:
    family: FamilyName = setting("bert", "model family (trainer/families.py)")
    vocab_size: int = setting(30522, "vocabulary size (the shards' when training)", at_least=1)
    hidden_size: int = setting(768, "width of the encoder", at_least=1)
    num_layers: int = setting(12, "encoder layers", at_least=1)
    num_heads: int = setting(12, "attention heads", at_least=1)
    intermediate_size: int = setting(3072, "width of the feed-forward layer", at_least=1)
    max_position: int = setting(512, "position embeddings", at_least=1)
    # RoBERTa dropped segment embeddings with NSP.
    type_vocab_size: int = setting(2, "token types (0: no token-type embedding)", at_least=0)
    dropout: float = setting(0.1, "dropout", **_SHARE_BELOW_ONE)
    attention_dropout: float = setting(
        0.1, "dropout of attention probabilities", **_SHARE_BELOW_ONE
    )
    layer_norm_eps: float = setting(1e-12, "layer norm epsilon", **_POSITIVE)
    initializer_range: float = setting(0.02, "std of the initial weights", **_POSITIVE)
    # BERT as published is post-LN; pre-LN trains more stably at large learning rates.
    pre_ln: bool = setting(False, "layer norm before each sub-layer")
    # Padded rows make faster matmuls; the logits are sliced back.
    pad_vocab_to: int = setting(64, "embedding rows padded to a multiple of this", at_least=1)
    pad_token_id: int = setting(
        0, "id of the padding token (the shards' when training)", at_least=0
    )
    # Factorized embedding (ALBERT, ELECTRA).
    embedding_size: int | None = setting(
        None, "width of the embeddings, projected to hidden_size (None: hidden_size)", at_least=1
    )
    # ALBERT's cross-layer parameter sharing (section 3.1, table 4).
    share: Share = setting("none", "layer parameters shared across layers")
    # ELECTRA section 3.2: a generator 1/4 to 1/2 of the discriminator's width works best,
    # and the discriminator's loss weighs 50.
    generator_fraction: float = setting(
        0.25, "ELECTRA: the generator's share of the width", bounds=(0.0, 1.0), open_ends="low"
    )
    rtd_weight: float = setting(
        50.0,
        "ELECTRA: weight of the discriminator's loss",
        bounds=(0.0, math.inf),
        open_ends="high",
    )
    sbo_max_span: int = setting(32, "SpanBERT's SBO: relative positions inside a span", at_least=1)
    # TinyBERT's W_h (one projection for every mapped layer, as its released code has it);
    # set from --teacher when the widths differ.
    teacher_width: int | None = setting(
        None, "TinyBERT's hid: the teacher's width the student's states are projected to",
        at_least=1,
    )  # fmt: skip
    # T5 v1.1 small has 6 heads of 64 at d_model 512.
    head_size: int | None = setting(
        None, "width of one head (None: hidden_size / num_heads)", at_least=1
    )
    # T5 (Raffel et al. 2020, section 2.1): 32 buckets, logarithmic up to a distance of 128.
    decoder_layers: int | None = setting(
        None, "T5, BART: decoder depth (None: num_layers)", at_least=1
    )
    relative_buckets: int = setting(32, "T5: relative position buckets", at_least=1)
    relative_max_distance: int = setting(128, "T5: distance of the last bucket", at_least=1)

    def __post_init__(self) -> None:
        check_choices(self, "model")
        if self.head_size is None and self.hidden_size % self.num_heads:
            raise SettingError(
                "model.hidden_size",
                f"{self.hidden_size} is not a multiple of num_heads {self.num_heads}",
            )

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
    name: OptimName = setting("adamw", "optimizer")
    lr: float = setting(1e-4, "peak learning rate", flag="lr", **_POSITIVE)
    beta1: float = setting(0.9, "Adam's beta1", **_SHARE_BELOW_ONE)
    beta2: float = setting(0.999, "Adam's beta2", **_SHARE_BELOW_ONE)
    eps: float = setting(1e-6, "Adam's epsilon", **_POSITIVE)
    weight_decay: float = setting(
        0.01, "decoupled weight decay", bounds=(0.0, math.inf), open_ends="high"
    )
    warmup_steps: int = setting(
        10_000, "warm-up in steps (as --warmup 10000)", flag="warmup-steps", at_least=0
    )
    grad_clip: float = setting(
        1.0, "gradient norm clipped to this (0: none)", bounds=(0.0, math.inf), open_ends="high"
    )
    decay_steps: int | None = setting(
        None, "steps over which the rate decays to zero (None: max_steps)", at_least=1
    )
    # A preset's step count is its paper's, for a run of its length; a share fits any length
    # (RoBERTa fine-tuning's 0.06).
    warmup_ratio: float | None = setting(
        None, "warm-up as a share of the decay steps, instead of warmup_steps", **_SHARE_BELOW_ONE
    )
    # The rate then never reaches its peak.
    force_warmup: bool = setting(
        False, "train even if the warm-up lasts the whole run", flag="force-warmup"
    )

    def __post_init__(self) -> None:
        check_choices(self, "optim")


@dataclass(frozen=True)
class Phase2Config:
    """BERT's second phase: from `start_step` on, read `data` (length 512) at `batch_size`."""

    data: str = setting(help="second phase shards (BERT: length 512)", flag="phase2-data")
    start_step: int = setting(
        help="step the second phase starts at", flag="phase2-step", at_least=1
    )
    batch_size: int | None = setting(
        None, "second phase batch size", flag="phase2-batch-size", at_least=1
    )

    def __post_init__(self) -> None:
        check_choices(self, "phase2")


@dataclass(frozen=True)
class TrainConfig:
    """Every setting of a run. Top-level settings are flags of `cloze train` by name;
    a section's (model, optim, masking, phase2) are reached by `--set SECTION.NAME=...`,
    or by the flag a field names (`optim.lr` is `--lr`)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    masking: MaskingSettings = field(default_factory=MaskingSettings)
    objectives: tuple[Objective, ...] = setting(
        ("mlm",),
        f"comma-separated, from: {','.join(OBJECTIVES)} (clm, t5, plm and bart alone: "
        "gpt's, t5's, xlnet's and bart's)",
        flag="objective",
        metavar="LIST",
        parse=_objectives,
    )
    batch_size: int = setting(32, "sequences per micro-batch per process", at_least=1)
    # The global batch is batch_size x grad_accum x ranks.
    grad_accum: int = setting(1, "micro-batches per optimizer step", at_least=1)
    max_steps: int = setting(1_000, "optimizer steps of the run", at_least=1)
    seed: int = setting(DEFAULT_SEED, "seed of the weights, data order and masks", bounds=SEEDS)
    save_every: int = setting(500, "commit a checkpoint every N steps", at_least=1)
    keep: int = setting(3, "committed checkpoints to keep", at_least=1)
    log_every: int = setting(10, "log every N steps", at_least=1)
    num_workers: int = setting(0, "loader processes per rank (0: in process)", at_least=0)
    shuffle_buffer: int = setting(
        SHUFFLE_BUFFER, "sequences shuffled together per stream", at_least=1
    )
    verify_shards: bool = setting(False, "check each shard's sha256 before its first use")
    # Skipping is logged once per shard (trainer.data.loader).
    on_error: OnError = setting(
        "raise", "a damaged shard stops the run, or is skipped with a warning"
    )
    # Remote shards (https://, s3://, gs://, pipe:) are downloaded whole, so later epochs
    # and resumed runs read them from local disk.
    shard_cache: str | None = setting(
        None,
        "where remote shards are kept (default $CLOZEWORKS_CACHE or ~/.cache/clozeworks)",
        metavar="DIR",
    )
    shard_cache_gb: float = setting(
        DEFAULT_LIMIT / 1e9,
        "most disk the shard cache may use (least recently used shards go first)",
        metavar="GB",
        bounds=(0.0, math.inf),
        open_ends="high",
    )
    # Each micro-batch comes from one set. Not a flag of its own: --data a=0.6,b=0.4.
    mixture: dict[str, float] | None = None
    eval_data: str | None = setting(None, "held-out shard set", metavar="SOURCE")
    # run_mlm.py's validation split: the same sequences on every rank count and resume.
    eval_split: float = setting(
        0.0,
        "hold out this share of --data for evaluation (0.005 or 0.5%), never trained on",
        metavar="SHARE",
        parse=parse_share,
        bounds=(0.0, MAX_EVAL_SPLIT),
    )
    eval_every: int = setting(0, "evaluate every N steps (0: at the end)", at_least=0)
    eval_batches: int = setting(50, "held-out batches per evaluation", at_least=1)
    phase2: Phase2Config | None = None
    # The architecture comes from them (trainer/init_from.py).
    init_from: str | None = setting(
        None,
        "start from these weights: a transformers directory (as cloze export writes), "
        "a run or a step directory; the architecture is theirs, the optimizer fresh",
        metavar="DIR",
    )
    # trainer/distill: the student is this run's model, the teacher frozen beside it.
    teacher: str | None = setting(
        None,
        "distil from this model (a run, a step directory or a transformers directory "
        "with an MLM head and the shards' vocabulary): DistilBERT's loss, objectives "
        "mlm,kd,cos; a student as wide starts from every other teacher layer",
        metavar="DIR",
    )
    # DistilBERT's (Sanh et al. 2019, and its released command).
    temperature: float = setting(
        2.0, "softmax temperature of the teacher's soft targets (kd)", **_POSITIVE
    )
    device: Device = setting("auto", "where to train (auto: a GPU when there is one)")
    # trainer/precision.py; fp16 has a dynamic loss scale.
    precision: Precision = setting(
        "auto", "auto: bf16 on GPU, fp32 on CPU; fp16 (GPUs without bf16) scales the loss"
    )
    compile: bool = setting(False, "torch.compile the encoders")
    # GPU kernels that sum with atomics (embedding and scatter backward) round in a
    # different order on every run.
    deterministic: bool = setting(
        False,
        "deterministic GPU kernels (somewhat slower): a resumed run ends bit-identical "
        "to an uninterrupted one on a GPU too, as it does on the CPU",
    )
    # Token-wise layers on [T, H], attention over variable-length rows: the same outputs,
    # less work.
    unpad: bool = setting(True, "run the encoder on real tokens only when a batch has padding")
    # bert-large and roberta-large at long sequences fit where they otherwise do not.
    grad_checkpointing: bool = setting(
        False, "recompute encoder layers in the backward pass: less memory, ~1/3 more compute"
    )
    # trainer/fsdp.py (FSDP2).
    fsdp: bool = setting(
        False,
        "under torchrun: shard weights, gradients and optimizer state over the "
        "processes (FSDP) instead of a whole copy per process (DDP)",
    )
    # None is settled before the run (config.json says which).
    report_to: tuple[str, ...] | None = setting(
        None,
        "comma-separated trackers beside metrics.jsonl, from: "
        f"{', '.join(TRACKERS)}; or none (default: tensorboard when installed); each an "
        "extra, configured by its own environment variables (WANDB_MODE=offline, "
        "MLFLOW_TRACKING_URI)",
        metavar="LIST",
        parse=parse_trackers,
    )

    def __post_init__(self) -> None:
        check_choices(self)
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
            raise SettingError("eval_data", "and {eval_split} both name a held-out set; pass one")
        if self.report_to is not None:
            check_trackers(self.report_to)
        if self.precision == "fp16" and self.fsdp:
            # FSDP's sharded gradients need a sharded scaler; bf16 needs none.
            raise SettingError("precision", "fp16 with {fsdp} is not supported; use bf16")

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


_SECTIONS: dict[str, type] = {
    "model": ModelConfig,
    "optim": OptimConfig,
    "masking": MaskingSettings,
    "phase2": Phase2Config,
}


# `merge`'s source for settings given as flags.
COMMAND_LINE = "command line"


def merge(config: TrainConfig, data: dict[str, Any], source: str) -> TrainConfig:
    """`config` with every setting `data` names replaced (a section's fields by a table),
    each value checked as its setting reads it (schemas/overlay.py); UsageError names
    `source` and the key, SettingError from the command line names the setting."""
    settings = {s.name: s for s in settings_of(TrainConfig)}
    changes: dict[str, Any] = {}
    for key, value in data.items():
        if key in _SECTIONS:
            changes[key] = _section(config, key, value, source)
        elif key == "mixture":
            changes[key] = value
        elif key == "tensorboard" and isinstance(value, bool):
            # The switch before --report-to, still read from older config files.
            changes["report_to"] = ("tensorboard",) if value else ()
        elif key in settings:
            changes[key] = checked(source, key, settings[key], value)
        else:
            raise UsageError(f"{source}: unknown setting {key!r}")
    return _replaced(config, changes, source)


def _section(config: TrainConfig, key: str, value: Any, source: str) -> Any:
    """The section `key` of `config` with the table `value` laid over it (phase2, which
    may be absent, is made whole from it)."""
    cls = _SECTIONS[key]
    current = getattr(config, key)
    if value is None and key == "phase2":
        return None
    if isinstance(value, cls):
        return value
    if not isinstance(value, dict):
        raise UsageError(f"{source}: [{key}] must be a table")
    settings = {s.name: s for s in settings_of(cls)}
    bad = sorted(set(value) - set(settings))
    if bad:
        raise UsageError(f"{source}: unknown {key} setting(s): {', '.join(bad)}")
    values = {n: checked(source, f"{key}.{n}", settings[n], v) for n, v in value.items()}
    if current is None:
        missing = [n for n, s in settings.items() if s.required and n not in values]
        if missing:
            raise UsageError(f"{source}: [{key}] needs {' and '.join(missing)}")
        return _replaced(cls, values, source, section=key)
    return _replaced(current, values, source, section=key)


def _replaced(obj: Any, changes: dict[str, Any], source: str, section: str = "") -> Any:
    """`obj` (or a new `obj` when it is a class) with `changes`, its checks' errors said
    as coming from `source`."""
    try:
        return obj(**changes) if isinstance(obj, type) else replace(obj, **changes)
    except SettingError as err:
        if source == COMMAND_LINE:
            raise  # the command line names the setting by the flag the user typed
        raise UsageError(f"{source}: {err}") from None
    except UsageError as err:
        raise UsageError(f"{source}: {err}") from None
    except ValueError as err:  # masking's own checks
        raise UsageError(f"{source}: [{section}]: {err}") from None


def load_config_file(path: Path, base: TrainConfig) -> TrainConfig:
    """`base` overridden by a TOML (`.toml`) or JSON file; BadInputError names the file."""
    data = read_table(path)
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
