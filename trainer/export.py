"""A run's checkpoint as a directory Hugging Face `transformers` loads, with its tokenizer.

| our model | transformers class |
|---|---|
| bert, post-LN, nsp/sop head | `BertForPreTraining` |
| bert, post-LN, no 2-class head | `BertForMaskedLM` (an sso, sbo or wso head stays behind) |
| bert or roberta, pre-LN | `RobertaPreLayerNormForMaskedLM` (pre-LN layers, a final LayerNorm) |
| roberta | `RobertaForMaskedLM` |
| albert | `AlbertForPreTraining` with a sentence head (2 or 3 labels), else `AlbertForMaskedLM` |
| electra | `ElectraForPreTraining`, and `generator/` with `ElectraForMaskedLM` |
| gpt | `GPT2LMHeadModel` (`trainer/export_generative.py`) |
| t5 | `T5ForConditionalGeneration` |
| xlnet | `XLNetLMHeadModel` |

Embedding rows are cut back to the real vocabulary. RoBERTa-style classes number positions
from `pad_token_id + 1`, so their position table gets that many leading rows. Pre-LN ALBERT
and ELECTRA have no transformers class and are refused.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from torch import nn

from clozeworks.corpus.vocab.files import copy_tokenizer_files
from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.trainer import export_generative as gen
from clozeworks.trainer.checkpoint import DamagedCheckpoint, committed_steps, load_intact, step_dir
from clozeworks.trainer.config import ModelConfig, TrainConfig, load_config_file
from clozeworks.trainer.models import build_model
from clozeworks.trainer.models.bert import Encoder, Layer
from clozeworks.trainer.models.electra import generator_config

CONFIG_FILE = "config.json"
Tensors = dict[str, torch.Tensor]


def load_run(run: Path, step: int | None = None) -> tuple[TrainConfig, nn.Module, dict[str, Any]]:
    """The run's config, its model with the weights of `step` (newest if None), config.json."""
    path = run / CONFIG_FILE
    if not path.is_file():
        raise BadInputError(f"{run}: no {CONFIG_FILE}, so this is not a training run directory")
    raw = json.loads(path.read_text(encoding="utf-8"))
    config = load_config_file(path, TrainConfig())
    steps = committed_steps(run)
    if not steps:
        raise BadInputError(f"{run}: no committed checkpoint (step-NNNNNNN/ with COMMITTED)")
    if step is not None and step not in steps:
        raise UsageError(f"{run}: no committed checkpoint for step {step}; have {steps}")
    model = build_model(config)
    chosen = step_dir(run, step or steps[-1])
    try:
        load_intact(chosen, model, None)
    except DamagedCheckpoint as err:
        older = [s for s in steps if s < (step or steps[-1])]
        hint = f"; --step {older[-1]} is the previous one" if older else ""
        raise BadInputError(f"{chosen}: damaged checkpoint: {err}{hint}") from None
    return config, model.eval(), raw


def export_run(run: Path, output: Path, step: int | None = None) -> list[Path]:
    """Write `output` (and `output/generator` for ELECTRA); returns the directories written."""
    config, model, raw = load_run(run, step)
    tokenizer = Path(raw.get("tokenizer", ""))
    if not (tokenizer / "tokenizer.json").is_file():
        raise BadInputError(f"{tokenizer}: the run's tokenizer is missing (config.json names it)")
    written = []
    special = _special_ids(tokenizer)
    for sub, hf in to_transformers(model, config, special):
        target = output / sub
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        hf.save_pretrained(tmp)
        copy_tokenizer_files(tokenizer, tmp)
        _readable_by_all(tmp)
        shutil.rmtree(target, ignore_errors=True)
        tmp.replace(target)
        written.append(target)
    return written


def _special_ids(tokenizer: Path) -> dict[str, int]:
    from clozeworks.corpus.vocab.files import load_tokenizer

    return load_tokenizer(tokenizer).special_ids


def to_transformers(
    model: nn.Module, config: TrainConfig, special: dict[str, int] | None = None
) -> list[tuple[str, Any]]:
    """(subdirectory, transformers model) pairs holding `model`'s weights. `special`: the
    tokenizer's special ids by role, for the generative families' bos / eos."""
    try:
        import transformers as tf
    except ImportError:
        raise UsageError("export needs transformers: pip install 'clozeworks[export]'") from None
    m = config.model
    special = special or {}
    if m.family == "gpt":
        gpt = _load(tf.GPT2LMHeadModel, gen.gpt_config(tf, m, special), gen.gpt_weights(model, m))
        return [("", gpt)]
    if m.family == "t5":
        return [("", gen.t5_model(tf, m, special, gen.t5_weights(model, m), _load))]
    if m.family == "xlnet":
        config = gen.xlnet_config(tf, m, special)
        return [("", _load(tf.XLNetLMHeadModel, config, gen.xlnet_weights(model, m)))]
    if m.family == "electra":
        if m.pre_ln:
            raise UsageError("transformers has no pre-LN ELECTRA; train with pre_ln = false")
        small = generator_config(m)
        disc = _load(tf.ElectraForPreTraining, _electra_config(tf, m), _electra_disc(model, m))
        g = _load(tf.ElectraForMaskedLM, _electra_config(tf, small), _electra_gen(model, small))
        return [("", disc), ("generator", g)]
    if m.family == "albert":
        if m.pre_ln:
            raise UsageError("transformers has no pre-LN ALBERT; train with pre_ln = false")
        return [_albert(tf, model, m)]
    if m.pre_ln:
        return [_roberta(tf, model, m, prelayernorm=True)]
    if m.family == "roberta":
        return [_roberta(tf, model, m, prelayernorm=False)]
    return [_bert(tf, model, m)]


def hf_weights(model: nn.Module, config: TrainConfig) -> list[tuple[str, Tensors]]:
    """(subdirectory, {transformers key: tensor}) as `to_transformers` writes them. Most
    tensors are views of the model's parameters (so copying into them loads the model);
    the rest are derived (RoBERTa's offset positions, absent token types, an identity
    projection), which `trainer.init_from` handles by name."""
    m = config.model
    if m.family == "gpt":
        return [("", gen.gpt_weights(model, m))]
    if m.family == "t5":
        return [("", gen.t5_weights(model, m))]
    if m.family == "xlnet":
        return [("", gen.xlnet_weights(model, m))]
    if m.family == "electra":
        g = generator_config(m)
        return [("", _electra_disc(model, m)), ("generator", _electra_gen(model, g))]
    if m.family == "albert":
        return [("", _albert_weights(model, m))]
    if m.pre_ln or m.family == "roberta":
        return [("", _roberta_weights(model, m, prelayernorm=m.pre_ln))]
    return [("", _bert_weights(model, m))]


def _load(cls: Any, hf_config: Any, weights: Tensors) -> Any:
    hf = cls(hf_config)
    missing, unexpected = hf.load_state_dict(weights, strict=False)
    missing = [k for k in missing if not k.endswith("position_ids")]
    if missing or unexpected:
        raise RuntimeError(f"{cls.__name__}: missing {missing}, unexpected {unexpected}")
    return hf.eval()


def _common(m: ModelConfig, **kw: Any) -> dict[str, Any]:
    common = dict(
        vocab_size=m.vocab_size,
        hidden_size=m.hidden_size,
        num_hidden_layers=m.num_layers,
        num_attention_heads=m.num_heads,
        intermediate_size=m.intermediate_size,
        hidden_act="gelu",
        hidden_dropout_prob=m.dropout,
        attention_probs_dropout_prob=m.attention_dropout,
        max_position_embeddings=m.max_position,
        type_vocab_size=max(1, m.type_vocab_size),
        initializer_range=m.initializer_range,
        layer_norm_eps=m.layer_norm_eps,
        pad_token_id=m.pad_token_id,
    )
    return {**common, **kw}


def _ln(prefix: str, norm: nn.LayerNorm) -> Tensors:
    return {f"{prefix}.weight": norm.weight, f"{prefix}.bias": norm.bias}


def _linear(prefix: str, linear: nn.Linear) -> Tensors:
    return {f"{prefix}.weight": linear.weight, f"{prefix}.bias": linear.bias}


def _embeddings(prefix: str, encoder: Encoder, m: ModelConfig, position_offset: int = 0) -> Tensors:
    e = encoder.embeddings
    width = e.word.embedding_dim
    position = e.position.weight
    if position_offset:  # RoBERTa numbers positions from pad_token_id + 1
        position = torch.cat([position.new_zeros(position_offset, width), position])
    token_type = e.token_type.weight if e.token_type is not None else position.new_zeros(1, width)
    return {
        f"{prefix}.word_embeddings.weight": e.word.weight[: m.vocab_size],
        f"{prefix}.position_embeddings.weight": position,
        f"{prefix}.token_type_embeddings.weight": token_type,
        **_ln(f"{prefix}.LayerNorm", e.norm),
    }


def _qkv(prefix: str, layer: Layer, names: tuple[str, str, str]) -> Tensors:
    out: Tensors = {}
    weights = layer.attention.qkv.weight.chunk(3, dim=0)
    biases = layer.attention.qkv.bias.chunk(3, dim=0)
    for name, w, b in zip(names, weights, biases, strict=True):
        out[f"{prefix}.{name}.weight"] = w
        out[f"{prefix}.{name}.bias"] = b
    return out


def _bert_layers(prefix: str, encoder: Encoder) -> Tensors:
    """Post-LN layers in BertLayer naming (BERT, RoBERTa, ELECTRA)."""
    out: Tensors = {}
    for i, layer in enumerate(encoder.layers):
        p = f"{prefix}.layer.{i}"
        out.update(_qkv(f"{p}.attention.self", layer, ("query", "key", "value")))
        out.update(_linear(f"{p}.attention.output.dense", layer.attention.out))
        out.update(_ln(f"{p}.attention.output.LayerNorm", layer.attention_norm))
        out.update(_linear(f"{p}.intermediate.dense", layer.ffn.up))
        out.update(_linear(f"{p}.output.dense", layer.ffn.down))
        out.update(_ln(f"{p}.output.LayerNorm", layer.ffn_norm))
    return out


def _mlm(prefix: str, head: Any, m: ModelConfig, names: tuple[str, str, str, str]) -> Tensors:
    dense, norm, decoder, bias = names
    word = head.decoder.weight[: m.vocab_size]
    b = head.bias[: m.vocab_size]
    out = {**_linear(f"{prefix}.{dense}", head.dense), **_ln(f"{prefix}.{norm}", head.norm)}
    out[f"{prefix}.{decoder}.weight"] = word
    out[f"{prefix}.{decoder}.bias"] = b
    out[f"{prefix}.{bias}"] = b
    return out


def _bert_weights(model: Any, m: ModelConfig) -> Tensors:
    enc = model.encoder
    weights = {
        **_embeddings("bert.embeddings", enc, m),
        **_bert_layers("bert.encoder", enc),
        **_mlm(
            "cls.predictions",
            model.mlm,
            m,
            ("transform.dense", "transform.LayerNorm", "decoder", "bias"),
        ),
    }
    sentence = model.sentence
    if sentence is not None and sentence.classifier.out_features == 2:
        weights.update(_linear("bert.pooler.dense", sentence.pooler))
        weights.update(_linear("cls.seq_relationship", sentence.classifier))
    return weights


def _bert(tf: Any, model: Any, m: ModelConfig) -> tuple[str, Any]:
    weights = _bert_weights(model, m)
    if "cls.seq_relationship.weight" in weights:
        return "", _load(tf.BertForPreTraining, tf.BertConfig(**_common(m)), weights)
    return "", _load(tf.BertForMaskedLM, tf.BertConfig(**_common(m)), weights)


def _roberta_weights(model: Any, m: ModelConfig, prelayernorm: bool) -> Tensors:
    enc = model.encoder
    offset = m.pad_token_id + 1
    root = "roberta_prelayernorm" if prelayernorm else "roberta"
    weights = {
        **_embeddings(f"{root}.embeddings", enc, m, position_offset=offset),
        **_mlm("lm_head", model.mlm, m, ("dense", "layer_norm", "decoder", "bias")),
    }
    if not prelayernorm:
        weights.update(_bert_layers(f"{root}.encoder", enc))
        return weights
    for i, layer in enumerate(enc.layers):
        p = f"{root}.encoder.layer.{i}"
        weights.update(_ln(f"{p}.attention.LayerNorm", layer.attention_norm))
        weights.update(_qkv(f"{p}.attention.self", layer, ("query", "key", "value")))
        weights.update(_linear(f"{p}.attention.output.dense", layer.attention.out))
        weights.update(_ln(f"{p}.intermediate.LayerNorm", layer.ffn_norm))
        weights.update(_linear(f"{p}.intermediate.dense", layer.ffn.up))
        weights.update(_linear(f"{p}.output.dense", layer.ffn.down))
    weights.update(_ln(f"{root}.LayerNorm", enc.final_norm))
    return weights


def _roberta(tf: Any, model: Any, m: ModelConfig, prelayernorm: bool) -> tuple[str, Any]:
    weights = _roberta_weights(model, m, prelayernorm)
    kw = _common(m, max_position_embeddings=m.max_position + m.pad_token_id + 1)
    if not prelayernorm:
        return "", _load(tf.RobertaForMaskedLM, tf.RobertaConfig(**kw), weights)
    cls = tf.RobertaPreLayerNormForMaskedLM
    return "", _load(cls, tf.RobertaPreLayerNormConfig(**kw), weights)


def _albert_groups(model: Any, m: ModelConfig) -> list[Any]:
    # One group when every layer is one module; otherwise a group per layer, shared
    # blocks copied into each (transformers cannot share only attention or only FFN).
    return [model.encoder.layers[0]] if m.share == "all" else list(model.encoder.layers)


def _albert_weights(model: Any, m: ModelConfig) -> Tensors:
    enc = model.encoder
    groups = _albert_groups(model, m)
    weights = _embeddings("albert.embeddings", enc, m)
    if enc.project is not None:
        weights.update(_linear("albert.encoder.embedding_hidden_mapping_in", enc.project))
    else:
        eye = torch.eye(m.hidden_size)
        weights["albert.encoder.embedding_hidden_mapping_in.weight"] = eye
        weights["albert.encoder.embedding_hidden_mapping_in.bias"] = torch.zeros(m.hidden_size)
    for g, layer in enumerate(groups):
        p = f"albert.encoder.albert_layer_groups.{g}.albert_layers.0"
        weights.update(_qkv(f"{p}.attention", layer, ("query", "key", "value")))
        weights.update(_linear(f"{p}.attention.dense", layer.attention.out))
        weights.update(_ln(f"{p}.attention.LayerNorm", layer.attention_norm))
        weights.update(_linear(f"{p}.ffn", layer.ffn.up))
        weights.update(_linear(f"{p}.ffn_output", layer.ffn.down))
        weights.update(_ln(f"{p}.full_layer_layer_norm", layer.ffn_norm))
    weights.update(_mlm("predictions", model.mlm, m, ("dense", "LayerNorm", "decoder", "bias")))
    sentence = model.sentence
    if sentence is not None:
        weights.update(_linear("albert.pooler", sentence.pooler))
        weights.update(_linear("sop_classifier.classifier", sentence.classifier))
    return weights


def _albert(tf: Any, model: Any, m: ModelConfig) -> tuple[str, Any]:
    weights = _albert_weights(model, m)
    groups = len(_albert_groups(model, m))
    kw = _common(m, embedding_size=m.embedding_width, num_hidden_groups=groups)
    kw["inner_group_num"] = 1
    sentence = model.sentence
    if sentence is None:
        return "", _load(tf.AlbertForMaskedLM, tf.AlbertConfig(**kw), weights)
    kw["num_labels"] = sentence.classifier.out_features
    return "", _load(tf.AlbertForPreTraining, tf.AlbertConfig(**kw), weights)


def _electra_config(tf: Any, m: ModelConfig) -> Any:
    return tf.ElectraConfig(**_common(m, embedding_size=m.embedding_width))


def _electra_encoder(encoder: Encoder, m: ModelConfig) -> Tensors:
    weights = {
        **_embeddings("electra.embeddings", encoder, m),
        **_bert_layers("electra.encoder", encoder),
    }
    if encoder.project is not None:
        weights.update(_linear("electra.embeddings_project", encoder.project))
    return weights


def _electra_disc(model: Any, m: ModelConfig) -> Tensors:
    return {
        **_electra_encoder(model.discriminator, m),
        **_linear("discriminator_predictions.dense", model.rtd.dense),
        **_linear("discriminator_predictions.dense_prediction", model.rtd.predict),
    }


def _electra_gen(model: Any, gen: ModelConfig) -> Tensors:
    head = model.mlm
    return {
        **_electra_encoder(model.generator, gen),
        **_linear("generator_predictions.dense", head.dense),
        **_ln("generator_predictions.LayerNorm", head.norm),
        "generator_lm_head.weight": head.decoder.weight[: gen.vocab_size],
        "generator_lm_head.bias": head.bias[: gen.vocab_size],
    }


def _readable_by_all(directory: Path) -> None:
    """Give written files the mode the user's umask asks for: a model is for sharing, and
    some writers create their files 0600 (safetensors through a temporary file)."""
    mask = os.umask(0)
    os.umask(mask)
    for f in directory.rglob("*"):
        if f.is_file():
            f.chmod(0o666 & ~mask)
