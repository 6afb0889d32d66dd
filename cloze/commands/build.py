"""Run the whole corpus build: clean -> dedup -> vocab -> shard, into ROOT/clean, ROOT/docs,
ROOT/tokenizer and ROOT/shards, with one set of flags or a TOML file (--config).

A stage whose output is complete and was made from the same settings and input is
skipped (ROOT/build.json records what each stage was made from); --force reruns all.

The TOML file takes the flags' names as keys (dashes or underscores), at the top level or
under [clean], [dedup], [vocab] and [shard]; flags given on the command line win:

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
import tomllib
from pathlib import Path
from typing import Any

from clozeworks.commands import add_progress_flag, progress_wanted
from clozeworks.commands.shard import add_shard_arguments
from clozeworks.corpus.text.normalize import NORMAL_FORMS
from clozeworks.corpus.text.readers import DOC_SEPS, FORMATS
from clozeworks.corpus.vocab.train import VocabConfig
from clozeworks.pipelines.build import BuildConfig, run_build
from clozeworks.pipelines.shard import ShardConfig
from clozeworks.schemas.errors import UsageError
from clozeworks.schemas.special_tokens import VOCAB_KINDS

HELP = "raw files -> docs, tokenizer and shards in one go"
BEAM = True
SECTIONS = ("clean", "dedup", "vocab", "shard")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_progress_flag(p)
    p.add_argument("--config", type=Path, metavar="TOML", help="settings file (flags win)")
    p.add_argument("--input", nargs="+", metavar="PATH", help="raw files, dirs or globs")
    p.add_argument("--output", metavar="DIR", help="root of the build")
    p.add_argument("--force", action="store_true", default=None, help="rerun every stage")
    clean = p.add_argument_group("clean")
    clean.add_argument("--format", choices=FORMATS, help="record format (default: by extension)")
    clean.add_argument("--text-field", help="JSON field / Parquet column (default: text)")
    clean.add_argument("--id-field", help="field holding a document id (default: path#line)")
    clean.add_argument("--doc-sep", choices=DOC_SEPS, help=".txt: file or blank (default: file)")
    clean.add_argument("--normalize", choices=NORMAL_FORMS, help="normal form (default: NFC)")
    clean.add_argument("--filters", help="comma-separated filters (default: length)")
    dedup = p.add_argument_group("dedup")
    dedup.add_argument(
        "--exact", action=argparse.BooleanOptionalAction, help="exact dedup (default: on)"
    )
    dedup.add_argument(
        "--near", action=argparse.BooleanOptionalAction, help="MinHash near-dedup (default: off)"
    )
    dedup.add_argument("--threshold", type=float, help="near-dedup Jaccard threshold (0.8)")
    vocab = p.add_argument_group("vocab")
    vocab.add_argument("--kind", choices=VOCAB_KINDS, help="vocabulary kind (default: wordpiece)")
    vocab.add_argument("--vocab-size", type=int, help="default: the paper's size for --kind")
    vocab.add_argument(
        "--cased",
        action=argparse.BooleanOptionalAction,
        help="keep case; --no-cased lowercases and strips accents (default: no)",
    )
    vocab.add_argument(
        "--uncased", dest="cased", action="store_false", default=None, help="as --no-cased"
    )
    vocab.add_argument("--sample-docs", type=int, help="train on about this many documents")
    add_shard_arguments(p.add_argument_group("shard"), with_defaults=False)


def _actions(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in p._actions if a.dest not in ("help", "config")}


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
        if dest == "input" and isinstance(value, str):
            value = [value]
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(str, action.choices))
            raise UsageError(f"{path}: {key} must be one of {choices}, got {value!r}")
        want = action.type if action.type in (int, float) else None
        if want is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise UsageError(f"{path}: {key} must be a number, got {value!r}")
        out[dest] = want(value) if want is not None else value
    return out


def _shard_defaults() -> dict[str, Any]:
    probe = argparse.ArgumentParser(add_help=False)
    add_shard_arguments(probe)
    return {a.dest: a.default for a in probe._actions}


def resolve(args: argparse.Namespace, parser_actions: dict[str, argparse.Action]) -> dict[str, Any]:
    """Flags given > the TOML file > built-in defaults."""
    values = _shard_defaults()
    values.update(text_field="text", doc_sep="file", normalize="NFC", filters="length")
    values.update(exact=True, near=False, threshold=0.8, kind="wordpiece", cased=False)
    values.update(force=False)
    if args.config is not None:
        values.update(read_toml(args.config, parser_actions))
    values.update({k: v for k, v in vars(args).items() if v is not None and k != "config"})
    if not values.get("input") or not values.get("output"):
        raise UsageError("--input and --output are required (on the command line or in --config)")
    return values


def config_from(values: dict[str, Any]) -> BuildConfig:
    shard_fields = set(ShardConfig.__dataclass_fields__) - {
        "input", "tokenizer", "output", "mode", "max_seq_len", "seed", "sequences_per_shard",
        "settings",
    }  # fmt: skip
    return BuildConfig(
        inputs=list(values["input"]),
        root=str(values["output"]),
        clean={
            "fmt": values.get("format"),
            "text_field": values["text_field"],
            "id_field": values.get("id_field"),
            "doc_sep": values["doc_sep"],
            "normal_form": values["normalize"],
            "filters": [f for f in values["filters"].split(",") if f],
        },
        dedup={"exact": values["exact"], "near": values["near"], "threshold": values["threshold"]},
        vocab=VocabConfig(
            kind=values["kind"], vocab_size=values.get("vocab_size"), cased=values["cased"]
        ),
        vocab_sample_docs=values.get("sample_docs"),
        mode=values["mode"],
        max_seq_len=values["max_seq_len"],
        seed=values["seed"],
        sequences_per_shard=values["sequences_per_shard"],
        shard={k: values[k] for k in shard_fields if k in values},
        force=values["force"],
    )


def run(args: argparse.Namespace, beam_argv: list[str]) -> int:
    probe = argparse.ArgumentParser(add_help=False)
    add_arguments(probe)
    config = config_from(resolve(args, _actions(probe)))
    run_build(config, beam_argv, progress=progress_wanted(args))
    return 0
