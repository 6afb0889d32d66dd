"""Run the whole corpus build: clean -> dedup -> vocab -> shard, into ROOT/clean, ROOT/docs,
ROOT/tokenizer and ROOT/shards, with one set of flags or a TOML file (--config).

A stage whose output is complete and was made from the same settings and input is
skipped (ROOT/build.json records what each stage was made from); --force reruns all.

Every setting of `cloze clean`, `dedup`, `vocab` and `shard` is a setting here too, with
that verb's default (not the outputs --rejects and --emit-clusters). Where two stages have
a setting of the same name, the flag is the first stage's in the order shard, clean, dedup,
vocab (--seed is the shard seed); the others are set in the file. The TOML file takes the
settings' names as keys (dashes or underscores), under [clean], [dedup], [vocab] and
[shard], or at the top level for the stage whose flag it is; flags given on the command
line win:

    input = ["raw/"]
    output = "work"
    [vocab]
    kind = "wordpiece"
    vocab-size = 30522
    seed = 7          # the vocabulary sample's seed
    [shard]
    mode = "nsp"
    premask = "wwm"
    dupe-factor = 5
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clozeworks.commands import add_progress_flag, progress_wanted
from clozeworks.commands.clean import add_filter_settings, filter_options
from clozeworks.commands.flags import add_settings
from clozeworks.corpus.shards.settings import ShardSettings
from clozeworks.corpus.text.filters import FILTERS, filter_params
from clozeworks.corpus.vocab.sample import SampleSettings
from clozeworks.corpus.vocab.train import VocabConfig
from clozeworks.pipelines.build import BuildConfig, run_build
from clozeworks.pipelines.clean import CleanSettings
from clozeworks.pipelines.dedup import DedupSettings
from clozeworks.schemas.errors import ClozeError, SettingError, UsageError
from clozeworks.schemas.overlay import checked, read_table
from clozeworks.schemas.settings import Setting, settings_of

HELP = "raw files -> docs, tokenizer and shards in one go"
BEAM = True


@dataclass(frozen=True)
class Part:
    """One settings class of one stage: `[section]` in the TOML file, a field of BuildConfig."""

    section: str
    field: str
    cls: type


# In flag order: a setting name two stages share is the first one's flag.
PARTS = (
    Part("shard", "shard", ShardSettings),
    Part("clean", "clean", CleanSettings),
    Part("dedup", "dedup", DedupSettings),
    Part("vocab", "vocab", VocabConfig),
    Part("vocab", "sample", SampleSettings),
)
SECTIONS = ("clean", "dedup", "vocab", "shard")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_progress_flag(p)
    p.add_argument("--config", type=Path, metavar="TOML", help="settings file (flags win)")
    p.add_argument(
        "--input", nargs="+", action="extend", metavar="PATH", help="raw files, dirs or globs"
    )
    p.add_argument("--output", metavar="DIR", help="root of the build")
    p.add_argument("--force", action="store_true", default=None, help="rerun every stage")
    groups = {}
    for part in PARTS:
        if part.section not in groups:
            groups[part.section] = p.add_argument_group(part.section)
        add_settings(groups[part.section], part.cls, with_defaults=False)
    # The same spelling as `cloze vocab`'s for --no-cased.
    groups["vocab"].add_argument(
        "--uncased", dest="cased", action="store_false", default=None, help="as --no-cased"
    )
    add_filter_settings(groups["clean"], with_defaults=False)


def _flag_owners(parser_actions: dict[str, argparse.Action]) -> dict[str, Part]:
    """Which part each flag's dest sets: the first part with a setting of that name."""
    owners: dict[str, Part] = {}
    for part in PARTS:
        for s in settings_of(part.cls):
            owners.setdefault(s.name, part)
    return {dest: owners[dest] for dest in parser_actions if dest in owners}


def _keys(part: Part) -> dict[str, Setting]:
    """A part's settings by every name the file may use: field, flag, dashes or not."""
    out = {}
    for s in settings_of(part.cls):
        for name in (s.name, s.flag[2:], s.flag[2:].replace("-", "_")):
            out[name] = s
    return out


def _filter_keys() -> dict[str, str]:
    """Filter thresholds (clean's): TOML key -> the flag's dest."""
    out = {}
    for name in FILTERS:
        for param in filter_params(name):
            dest = "filter__" + param.flag.replace("-", "_")
            out[param.flag] = out[param.flag.replace("-", "_")] = dest
    return out


def read_toml(path: Path, owners: dict[str, Part]) -> dict[Any, Any]:
    """Settings from a TOML file: {(section field, setting name): value} for the stages'
    settings, {name: value} for build's own and the filter thresholds."""
    data = read_table(path, "TOML")
    filters = _filter_keys()
    out: dict[Any, Any] = {}
    for key, value in data.items():
        if key in SECTIONS and isinstance(value, dict):
            for name, item in value.items():
                _place(out, path, f"{key}.{name}", key, name, item, owners, filters)
        else:
            _place(out, path, key, None, key, value, owners, filters)
    return out


def _place(
    out: dict[Any, Any],
    path: Path,
    key: str,
    section: str | None,
    name: str,
    value: Any,
    owners: dict[str, Part],
    filters: dict[str, str],
) -> None:
    if section is None and name in ("input", "output", "force"):
        out[name] = [value] if name == "input" and isinstance(value, str) else value
        return
    if section in (None, "clean") and name in filters:
        out[filters[name]] = value
        return
    parts = [p for p in PARTS if p.section == section] if section else []
    if section is None:
        dest = name.replace("-", "_")
        owner = owners.get(dest) or next((p for p in PARTS if name in _keys(p)), None)
        parts = [owner] if owner is not None else []
    for part in parts:
        keys = _keys(part)
        if name in keys:
            s = keys[name]
            out[(part.field, s.name)] = checked(str(path), key, s, value)
            return
    raise UsageError(f"{path}: unknown setting {key!r}")


def resolve(args: argparse.Namespace, parser_actions: dict[str, argparse.Action]) -> BuildConfig:
    """Flags given > the TOML file > each stage's own defaults."""
    owners = _flag_owners(parser_actions)
    values: dict[Any, Any] = {}
    if args.config is not None:
        values.update(read_toml(args.config, owners))
    for dest, value in vars(args).items():
        if value is None or dest in ("config", "progress", "given_flags", "command"):
            continue
        if dest in owners:
            values[(owners[dest].field, dest)] = _flag_value(owners[dest], dest, value)
        else:
            values[dest] = value
    if not values.get("input") or not values.get("output"):
        raise UsageError("--input and --output are required (on the command line or in --config)")
    return config_from(values)


def _flag_value(part: Part, name: str, value: Any) -> Any:
    """A flag's value as the setting holds it: a text its `parse` reads (a comma-separated
    list of filters, formats, sizes), as the stage's own verb reads it."""
    s = _keys(part)[name]
    if s.parse is None or not isinstance(value, str):
        return value
    try:
        return s.parse(value)
    except (ValueError, ClozeError) as err:
        raise SettingError(name, str(err)) from None


def config_from(values: dict[Any, Any]) -> BuildConfig:
    stages: dict[str, dict[str, Any]] = {part.field: {} for part in PARTS}
    for key, value in values.items():
        if isinstance(key, tuple):
            stages[key[0]][key[1]] = value
    # Filter thresholds: flags and file values over the registry's defaults.
    clean = stages["clean"]
    names = clean.get("filters") or CleanSettings().filters
    defaults = {
        "filter__" + p.flag.replace("-", "_"): p.default for n in names for p in filter_params(n)
    }
    given = {k: v for k, v in values.items() if isinstance(k, str) and k.startswith("filter__")}
    clean["filter_options"] = filter_options(argparse.Namespace(**{**defaults, **given}), names)
    return BuildConfig(
        inputs=list(values["input"]),
        root=str(values["output"]),
        clean=CleanSettings(**clean),
        dedup=DedupSettings(**stages["dedup"]),
        vocab=VocabConfig(**stages["vocab"]),
        sample=SampleSettings(**stages["sample"]),
        shard=ShardSettings(**stages["shard"]),
        force=bool(values.get("force", False)),
    )


def _actions(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in p._actions if a.dest not in ("help", "config")}


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    probe = argparse.ArgumentParser(add_help=False)
    add_arguments(probe)
    config = resolve(args, _actions(probe))
    config.shard.validate()
    run_build(config, beam_argv, progress=progress_wanted(args))
    return 0
