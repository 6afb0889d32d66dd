"""Run the whole corpus build: clean -> dedup -> vocab -> shard, into ROOT/clean, ROOT/docs,
ROOT/tokenizer and ROOT/shards, with one set of flags or a TOML file (--config).

A stage whose output is complete and was made from the same settings and input is
skipped (ROOT/build.json records what each stage was made from); --force reruns all.

Every flag of `cloze clean`, `dedup`, `vocab` and `shard` is a flag here too (not the
outputs --rejects and --emit-clusters; --seed is the shard seed), with that verb's
default. The TOML file takes the flags' names as keys (dashes or underscores), at the top
level or under [clean], [dedup], [vocab] and [shard]; flags given on the command line win:

    input = ["raw/"]
    output = "work"
    [vocab]
    kind = "wordpiece"
    vocab-size = 30522
    [shard]
    mode = "nsp"
    premask = "wwm"
    dupe-factor = 5
"""

from __future__ import annotations

import argparse
import copy
import functools
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from clozeworks.commands import add_progress_flag, progress_wanted
from clozeworks.commands import clean as clean_verb
from clozeworks.commands import dedup as dedup_verb
from clozeworks.commands import vocab as vocab_verb
from clozeworks.commands.shard import add_shard_arguments
from clozeworks.pipelines.build import BuildConfig, run_build
from clozeworks.pipelines.shard import ShardConfig
from clozeworks.schemas.errors import UsageError

HELP = "raw files -> docs, tokenizer and shards in one go"
BEAM = True
SECTIONS = ("clean", "dedup", "vocab", "shard")
STAGE_VERBS = {"clean": clean_verb, "dedup": dedup_verb, "vocab": vocab_verb}
# A stage verb's flags that build has in its own form, or that are its own business.
NOT_BORROWED = {"help", "input", "output", "progress", "rejects", "emit_clusters"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_progress_flag(p)
    p.add_argument("--config", type=Path, metavar="TOML", help="settings file (flags win)")
    p.add_argument("--input", nargs="+", metavar="PATH", help="raw files, dirs or globs")
    p.add_argument("--output", metavar="DIR", help="root of the build")
    p.add_argument("--force", action="store_true", default=None, help="rerun every stage")
    # shard first: --seed is the shard seed (vocab's and dedup's keep their defaults).
    add_shard_arguments(p.add_argument_group("shard"), with_defaults=False)
    for name, module in STAGE_VERBS.items():
        _borrow(p, p.add_argument_group(name), module)


@functools.cache
def _verb_parser(module: Any) -> argparse.ArgumentParser:
    """A stage verb's own parser (only read: `_borrow` copies its actions)."""
    probe = argparse.ArgumentParser(add_help=False)
    module.add_arguments(probe)
    return probe


def _borrow(p: argparse.ArgumentParser, group: Any, module: Any) -> None:
    """Every flag of a stage's own verb that build does not have yet, with no default (so
    a flag given is told from one not given, and the TOML file fills in the rest); the
    verb's default goes into the help."""
    taken = {o for a in p._actions for o in a.option_strings}
    for action in _verb_parser(module)._actions:
        if action.dest in NOT_BORROWED or any(o in taken for o in action.option_strings):
            continue
        copied = copy.copy(action)
        if action.default not in (None, False, argparse.SUPPRESS) and action.help:
            copied.help = f"{action.help} (default: {action.default})".replace("%", "%%")
        copied.default = None
        copied.required = False
        group._add_action(copied)
        taken.update(copied.option_strings)


def _actions(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Each setting's action by dest and by flag name (`min_chars` for --min-chars)."""
    out: dict[str, argparse.Action] = {}
    for action in p._actions:
        if action.dest in ("help", "config"):
            continue
        out[action.dest] = action
        for flag in action.option_strings:
            if flag.startswith("--") and not flag.startswith("--no-"):
                out.setdefault(flag[2:].replace("-", "_"), action)
    return out


def read_toml(path: Path, actions: dict[str, argparse.Action]) -> dict[str, Any]:
    """Settings from a TOML file, keyed by flag dest. UsageError naming the file and key."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise UsageError(f"{path}: cannot read ({err.strerror or err})") from None
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"{path}: not valid TOML ({err})") from None
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if key in SECTIONS and isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    out: dict[str, Any] = {}
    for key, value in flat.items():
        dest = key.rsplit(".", 1)[-1].replace("-", "_")
        action = actions.get(dest)
        if action is None:
            raise UsageError(f"{path}: unknown setting {key!r}")
        if action.dest == "input" and isinstance(value, str):
            value = [value]
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(str, action.choices))
            raise UsageError(f"{path}: {key} must be one of {choices}, got {value!r}")
        want = action.type if action.type in (int, float) else None
        if want is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise UsageError(f"{path}: {key} must be a number, got {value!r}")
        out[action.dest] = want(value) if want is not None else value
    return out


def _shard_defaults() -> dict[str, Any]:
    probe = argparse.ArgumentParser(add_help=False)
    add_shard_arguments(probe)
    return {a.dest: a.default for a in probe._actions}


def resolve(args: argparse.Namespace, parser_actions: dict[str, argparse.Action]) -> dict[str, Any]:
    """Flags given > the TOML file > each stage verb's own defaults."""
    values: dict[str, Any] = {}
    for module in STAGE_VERBS.values():
        own = _verb_defaults(module)
        values.update({k: v for k, v in own.items() if k not in NOT_BORROWED})
    values.update(_shard_defaults())
    values.update(force=False)
    if args.config is not None:
        values.update(read_toml(args.config, parser_actions))
    values.update({k: v for k, v in vars(args).items() if v is not None and k != "config"})
    if not values.get("input") or not values.get("output"):
        raise UsageError("--input and --output are required (on the command line or in --config)")
    return values


def _verb_defaults(module: Any) -> dict[str, Any]:
    return {a.dest: a.default for a in _verb_parser(module)._actions if a.dest != "help"}


def _stage_args(values: dict[str, Any], module: Any, **fixed: Any) -> argparse.Namespace:
    """The namespace the stage's own verb would have parsed from these settings."""
    picked = {
        dest: default if dest in NOT_BORROWED else values.get(dest, default)
        for dest, default in _verb_defaults(module).items()
    }
    return argparse.Namespace(**{**picked, "progress": False, **fixed})


def config_from(values: dict[str, Any]) -> BuildConfig:
    shard_fields = set(ShardConfig.__dataclass_fields__) - {
        "input", "tokenizer", "output", "mode", "max_seq_len", "seed", "sequences_per_shard",
        "settings",
    }  # fmt: skip
    clean = clean_verb.config_from_args(
        _stage_args(values, clean_verb, input=list(values["input"]), output="")
    )
    dedup = dedup_verb.config_from_args(_stage_args(values, dedup_verb, input="", output=""))
    # Build's --seed is the shard seed: vocab samples with its own default seed.
    vocab_seed = _verb_defaults(vocab_verb)["seed"]
    vocab = vocab_verb.config_from_args(
        _stage_args(values, vocab_verb, input="", output="", seed=vocab_seed)
    )
    return BuildConfig(
        inputs=list(values["input"]),
        root=str(values["output"]),
        clean=_fields(clean, "inputs", "output"),
        dedup=_fields(dedup, "input", "output"),
        vocab=vocab.vocab,
        vocab_sample_docs=vocab.sample_docs,
        vocab_options={"sample_bytes": vocab.sample_bytes, "heldout_docs": vocab.heldout_docs},
        mode=values["mode"],
        max_seq_len=values["max_seq_len"],
        seed=values["seed"],
        sequences_per_shard=values["sequences_per_shard"],
        shard={k: values[k] for k in shard_fields if k in values},
        force=values["force"],
    )


def _fields(config: Any, *paths: str) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in fields(config) if f.name not in paths}


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    probe = argparse.ArgumentParser(add_help=False)
    add_arguments(probe)
    config = config_from(resolve(args, _actions(probe)))
    run_build(config, beam_argv, progress=progress_wanted(args))
    return 0
