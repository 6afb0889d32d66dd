"""`--init-from`: start a run from existing weights (continued or domain-adaptive pretraining).

A source is a transformers directory of a family `cloze export` writes (BERT, RoBERTa,
pre-LN RoBERTa, ALBERT, ELECTRA with `generator/`), or one of our runs (its newest
committed step) or a step directory. The architecture comes from the source, so
`--preset` only supplies the rest (optimizer, objectives); the tokenizer must be the one
the shards were encoded with. Weights are copied in; heads the source lacks keep their
fresh initialization and are reported as missing, tensors this model has no place for
are reported as unexpected. The optimizer starts fresh.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.schemas.manifest import Manifest
from clozeworks.schemas.validate import (
    MAX_TOKENIZER_BYTES,
    loads,
    read_bounded,
    read_json_object,
)
from clozeworks.trainer.checkpoint import committed_steps, intact_problem, step_dir
from clozeworks.trainer.config import ModelConfig, TrainConfig, load_config_file
from clozeworks.trainer.families import TRANSFORMERS_ROOTS, hf_weights, transformers_family

REPORT_FILE = "init.json"


@dataclass
class InitReport:
    source: str
    kind: str  # "transformers" or "run"
    matched: int = 0
    missing: list[str] = field(default_factory=list)  # our parameters left as initialized
    unexpected: list[str] = field(default_factory=list)  # source tensors with no place here
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def line(self) -> str:
        text = f"init from {self.source} ({self.kind}): {self.matched} tensors loaded"
        if self.missing:
            text += f"; newly initialized: {', '.join(self.missing)}"
        if self.unexpected:
            text += f"; unused from the source: {', '.join(self.unexpected)}"
        return text + "".join(f"; {n}" for n in self.notes)


@dataclass(frozen=True)
class _Source:
    path: Path
    kind: str  # "transformers" | "run"
    weights: Path  # transformers directory, or our step directory


def locate(path: str | Path) -> _Source:
    p = Path(path)
    if (p / "COMMITTED").is_file():
        return _Source(p, "run", p)
    config = p / "config.json"
    if not config.is_file():
        raise BadInputError(f"{p}: neither a transformers directory nor a run (no config.json)")
    try:
        raw = loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise BadInputError(f"{config}: not readable JSON ({err})") from None
    if "model_type" in raw:
        return _Source(p, "transformers", p)
    steps = committed_steps(p)
    if not steps:
        raise BadInputError(f"{p}: a run directory without a committed checkpoint")
    return _Source(p, "run", step_dir(p, steps[-1]))


def model_config(path: str | Path, current: ModelConfig) -> tuple[ModelConfig, list[str]]:
    """The architecture of the source (dropout and other training settings stay the run's),
    with notes on anything approximated."""
    src = locate(path)
    if src.kind == "run":
        run = src.weights.parent
        theirs = load_config_file(run / "config.json", TrainConfig()).model
        return theirs, []
    hf = read_json_object(src.path / "config.json")
    family, pre_ln = transformers_family(hf, src.path)
    hf = {
        **hf,
        **{ours: hf[theirs] for ours, theirs in family.config_names.items() if theirs in hf},
    }
    notes = []
    act = hf.get("hidden_act", "gelu")
    if act != "gelu":
        notes.append(f"the source uses {act}; trained here with exact gelu")
    # RobertaPreLayerNorm numbers positions from pad_token_id + 1 (RoBERTa's own too).
    offset = hf.get("pad_token_id", 1) + 1 if pre_ln else 0
    arch = replace(
        current,
        family=family.name,
        pre_ln=pre_ln,
        vocab_size=hf["vocab_size"],
        hidden_size=hf["hidden_size"],
        num_layers=hf["num_hidden_layers"],
        num_heads=hf["num_attention_heads"],
        intermediate_size=hf["intermediate_size"],
        max_position=hf["max_position_embeddings"] - offset,
        type_vocab_size=hf.get("type_vocab_size", 2),
        layer_norm_eps=hf.get("layer_norm_eps", 1e-12),
        embedding_size=None,
    )
    assert family.from_transformers is not None  # every family with model_types has one
    return family.from_transformers(hf, arch, src.path), notes


def check_tokenizer(
    path: str | Path, manifest: Manifest, shards_json: bytes | None, flag: str = "--init-from"
) -> str | None:
    """Refuse a source whose tokenizer is not the one of the shards (`shards_json`, their
    tokenizer.json); a note when only the files differ and the vocabulary is the same."""
    src = locate(path)
    where = src.path / "tokenizer.json"
    if src.kind == "run":
        raw = read_json_object(src.weights.parent / "config.json")
        where = Path(raw.get("tokenizer", "")) / "tokenizer.json"
    theirs = _vocabulary(where.parent)
    if theirs is None:
        raise BadInputError(f"{src.path}: no tokenizer ({where} is missing) to check against")
    digest = hashlib.sha256(theirs[1]).hexdigest()
    if digest == manifest.tokenizer_sha256:
        return None
    if shards_json is not None and _tokens(shards_json) == theirs[0]:
        return "same vocabulary, different tokenizer files"
    raise UsageError(
        f"{flag} {src.path}: its tokenizer ({digest[:12]}) is not the one the shards were "
        f"encoded with ({manifest.tokenizer_sha256[:12]}); build the shards with "
        "`cloze shard --tokenizer` of that directory"
    )


def load_weights(model: nn.Module, config: TrainConfig, path: str | Path) -> InitReport:
    src = locate(path)
    report = InitReport(str(src.path), src.kind)
    with torch.no_grad():
        if src.kind == "run":
            _load_run(model, src, report)
        else:
            _load_transformers(model, config, src, report)
    return report


def _load_run(model: nn.Module, src: _Source, report: InitReport) -> None:
    from safetensors.torch import load_file

    problem = intact_problem(src.weights)
    if problem is not None:
        raise BadInputError(f"{src.weights}: damaged checkpoint: {problem}")
    tensors = load_file(str(src.weights / "model.safetensors"))
    own = model.state_dict(keep_vars=True)
    written = set()
    for key, value in tensors.items():
        target = own.get(key)
        if target is None:
            report.unexpected.append(key)
            continue
        _check_shape(key, target, value, src)
        target.copy_(value)
        written.add(target.data_ptr())
        report.matched += 1
    # Tied weights are saved under one of their names: a parameter is loaded by any.
    report.missing = [n for n, p in model.named_parameters() if p.data_ptr() not in written]


def _load_transformers(
    model: nn.Module, config: TrainConfig, src: _Source, report: InitReport
) -> None:
    params = {id(p): name for name, p in model.named_parameters()}
    touched: set[str] = set()
    for sub, mapping in hf_weights(model, config):
        tensors = _hf_tensors(src.path / sub)
        tensors = _with_root(tensors, mapping)
        prefix = f"{sub}/" if sub else ""
        fold = None
        for key, target in mapping.items():
            value = tensors.pop(key, None)
            if value is None:
                continue
            base = target if target._base is None else target._base
            name = params.get(id(base))
            if name is not None:  # a view of one of our parameters: copy through it
                _check_shape(key, target, value, src)
                target.copy_(value)
                touched.add(name)
            elif key.endswith("position_embeddings.weight"):  # RoBERTa's offset rows
                position = _encoder(model, sub).embeddings.position.weight
                offset = max(0, value.shape[0] - position.shape[0])  # pad_token_id + 1 there
                _check_shape(key, position, value[offset:], src)
                position.copy_(value[offset:])
                touched.add(params[id(position)])
            elif key.endswith("token_type_embeddings.weight"):
                fold = value[0]  # one type, added to every token: part of every position
            elif key.endswith("embedding_hidden_mapping_in.weight"):  # E == H: identity
                if not torch.equal(value, torch.eye(value.shape[0])):
                    report.unexpected.append(prefix + key)
                    continue
            elif key.endswith("embedding_hidden_mapping_in.bias"):
                if bool(value.any()):
                    report.unexpected.append(prefix + key)
                    continue
            else:
                report.unexpected.append(prefix + key)
                continue
            report.matched += 1
        if fold is not None:
            _encoder(model, sub).embeddings.position.weight.add_(fold)
        report.unexpected.extend(prefix + k for k in tensors if not k.endswith("position_ids"))
    report.missing = [n for n, _ in model.named_parameters() if n not in touched]


def _encoder(model: Any, sub: str) -> Any:
    return model.generator if sub == "generator" else model.encoder


def _with_root(tensors: dict[str, torch.Tensor], mapping: dict[str, Any]) -> dict[str, Any]:
    """A base model saved without its head class (`BertModel`: `embeddings.*`) gets the
    prefix the head classes use (`bert.embeddings.*`)."""
    root = next((k.split(".")[0] for k in mapping if k.split(".")[0] in TRANSFORMERS_ROOTS), None)
    if root is None or any(k.startswith(f"{root}.") for k in tensors):
        return tensors
    return {f"{root}.{k}": v for k, v in tensors.items()}


def _hf_tensors(directory: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    single = directory / "model.safetensors"
    index = directory / "model.safetensors.index.json"
    if single.is_file():
        return load_file(str(single))
    if index.is_file():
        files = sorted(set(read_json_object(index)["weight_map"].values()))
        out: dict[str, torch.Tensor] = {}
        for name in files:
            out.update(load_file(str(directory / name)))
        return out
    legacy = directory / "pytorch_model.bin"
    if legacy.is_file():
        state = torch.load(legacy, map_location="cpu", weights_only=True)
        return dict(state)
    raise BadInputError(f"{directory}: no model.safetensors or pytorch_model.bin")


def _check_shape(key: str, target: torch.Tensor, value: torch.Tensor, src: _Source) -> None:
    if tuple(target.shape) != tuple(value.shape):
        raise BadInputError(
            f"{src.path}: {key} is {tuple(value.shape)} there and {tuple(target.shape)} here"
        )


def _vocabulary(directory: Path) -> tuple[list[str], bytes] | None:
    """(tokens in id order, the bytes that fingerprint the tokenizer) of a directory."""
    tok = directory / "tokenizer.json"
    if tok.is_file():
        data = read_bounded(tok, MAX_TOKENIZER_BYTES, "tokenizer file")
        return _tokens(data), data
    txt = directory / "vocab.txt"
    if txt.is_file():
        data = read_bounded(txt, MAX_TOKENIZER_BYTES, "tokenizer file")
        return data.decode("utf-8").splitlines(), data
    return None


def _tokens(tokenizer_json: bytes) -> list[str]:
    from tokenizers import Tokenizer

    vocab = Tokenizer.from_str(tokenizer_json.decode("utf-8")).get_vocab(with_added_tokens=True)
    return sorted(vocab, key=vocab.__getitem__)
