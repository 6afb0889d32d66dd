"""`cloze build`: clean -> dedup -> vocab -> shard into ROOT/{clean,docs,tokenizer,shards}.

A stage is skipped when its output is complete (its commit marker is there: .stats.json,
tokenizer.json, .manifest.json) and was made from the same settings and the same upstream
output. What each stage was made from is recorded in ROOT/build.json when the stage
finishes: its settings, a fingerprint of its input (the raw files' names, sizes and
mtimes; or the upstream marker's sha256) and the sha256 of its own marker. A stage's
record is dropped before it runs, so an interrupted stage is never taken as done, and a
stage that reruns makes every later stage rerun (its marker's hash changes).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from apache_beam.io.filesystems import FileSystems

from clozeworks.corpus.locks import OutputLock
from clozeworks.corpus.outputs import check_apart
from clozeworks.corpus.shards.settings import ShardSettings
from clozeworks.corpus.vocab.sample import SampleSettings
from clozeworks.corpus.vocab.train import TOKENIZER_FILE, VocabConfig
from clozeworks.pipelines.clean import CleanConfig, CleanSettings, language_warning, run_clean
from clozeworks.pipelines.dedup import DedupConfig, DedupSettings, run_dedup
from clozeworks.pipelines.plumbing.beamfs import BEAM_FS
from clozeworks.pipelines.plumbing.options import pipeline_options
from clozeworks.pipelines.read_raw import expand_inputs
from clozeworks.pipelines.shard import ShardConfig, run_shard
from clozeworks.pipelines.vocab import VocabRunConfig, run_vocab
from clozeworks.schemas.errors import BadInputError
from clozeworks.schemas.manifest import Manifest
from clozeworks.schemas.sidecars import MANIFEST_FILE, STATS_FILE, locate

BUILD_FILE = "build.json"
BUILD_VERSION = 1
STAGES = ("clean", "dedup", "vocab", "shard")


@dataclass(frozen=True)
class BuildConfig:
    """The raw inputs, the root the stages write under, and each stage's own settings."""

    inputs: Sequence[str]
    root: str
    clean: CleanSettings = field(default_factory=CleanSettings)
    dedup: DedupSettings = field(default_factory=DedupSettings)
    vocab: VocabConfig = field(default_factory=VocabConfig)
    sample: SampleSettings = field(default_factory=SampleSettings)
    shard: ShardSettings = field(default_factory=ShardSettings)
    force: bool = False  # run every stage even if its output is current


@dataclass
class BuildPaths:
    clean: str
    docs: str
    tokenizer: str
    shards: str

    @classmethod
    def under(cls, root: str) -> BuildPaths:
        return cls(
            BEAM_FS.join(root, "clean"),
            BEAM_FS.join(root, "docs"),
            BEAM_FS.join(root, "tokenizer"),
            BEAM_FS.join(root, "shards"),
        )


def _marker(directory: str, name: str) -> str:
    """A stage's commit marker as written (a root built before has the earlier names, and
    its stages stay current)."""
    return locate(directory, name, BEAM_FS.exists, BEAM_FS.join)


def _sha256(path: str) -> str | None:
    """Hash of a file on any Beam filesystem, None if it is not there."""
    if not BEAM_FS.exists(path):
        return None
    sha = hashlib.sha256()
    with BEAM_FS.open(path) as f:
        while data := f.read(1 << 20):
            sha.update(data)
    return sha.hexdigest()


def _fingerprint(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def inputs_fingerprint(patterns: Sequence[str]) -> str:
    """Names, sizes and modification times of every raw input file."""
    listing = []
    for path in expand_inputs(patterns):
        meta = FileSystems.match([path])[0].metadata_list[0]
        listing.append((path, meta.size_in_bytes, meta.last_updated_in_seconds))
    return _fingerprint(listing)


class BuildRecord:
    """ROOT/build.json: what each finished stage was made from."""

    def __init__(self, root: str) -> None:
        self.path = BEAM_FS.join(root, BUILD_FILE)
        self.stages: dict[str, dict[str, Any]] = {}
        if BEAM_FS.exists(self.path):
            try:
                data = BEAM_FS.read_json(self.path)
            except ValueError as err:  # UnicodeDecodeError too
                raise BadInputError(
                    f"{self.path}: not valid JSON ({err}); remove it to run every stage again"
                ) from None
            if isinstance(data, dict) and data.get("version") == BUILD_VERSION:
                self.stages = dict(data.get("stages", {}))

    def is_current(self, stage: str, settings: dict[str, Any], upstream: str, marker: str) -> bool:
        entry = self.stages.get(stage)
        if entry is None:
            return False
        return (
            entry.get("settings") == _fingerprint(settings)
            and entry.get("upstream") == upstream
            and entry.get("marker") == _sha256(marker)
        )

    def forget(self, stage: str) -> None:
        if self.stages.pop(stage, None) is not None:
            self._save()

    def finish(self, stage: str, settings: dict[str, Any], upstream: str, marker: str) -> None:
        self.stages[stage] = {
            "settings": _fingerprint(settings),
            "upstream": upstream,
            "marker": _sha256(marker),
            "values": json.loads(json.dumps(settings, default=str)),
        }
        self._save()

    def _save(self) -> None:
        BEAM_FS.write_json(self.path, {"version": BUILD_VERSION, "stages": self.stages})


def _settings(obj: Any, *drop: str) -> dict[str, Any]:
    return {k: v for k, v in asdict(obj).items() if k not in drop}


def _with_paths(cls: type, settings: Any, **paths: Any) -> Any:
    """A stage's config: its settings, and where."""
    return cls(**{f.name: getattr(settings, f.name) for f in fields(settings)}, **paths)


def run_build(
    config: BuildConfig,
    beam_argv: Sequence[str] = (),
    report: Callable[[str], None] = print,
    progress: bool = False,
) -> tuple[BuildPaths, Manifest]:
    """Run every stage that is not current, in order; `report` hears one line per stage,
    and with `progress` each stage draws its bars on stderr."""
    # Beam's FileSystems get the user's options before build.json is looked for.
    pipeline_options(beam_argv)
    paths = BuildPaths.under(config.root)
    # Raw inputs may sit under the root, beside the stages' directories, not in them.
    for stage_dir in (paths.clean, paths.docs, paths.tokenizer, paths.shards):
        check_apart({"output": stage_dir}, {"input": config.inputs})
    # The root's lock covers build.json; each stage locks its own directory as well.
    with OutputLock(BEAM_FS, config.root, "build"):
        record = BuildRecord(config.root)

        def stage(name: str, settings: dict[str, Any], upstream: str, marker: str) -> bool:
            """True if the stage must run (and its record has been dropped)."""
            if not config.force and record.is_current(name, settings, upstream, marker):
                report(f"{name}: up to date (same settings and input), skipped")
                return False
            record.forget(name)
            return True

        clean = _with_paths(CleanConfig, config.clean, inputs=config.inputs, output=paths.clean)
        clean_settings = _settings(clean, "output")
        clean_marker = _marker(paths.clean, STATS_FILE)
        raw = inputs_fingerprint(config.inputs)
        if stage("clean", clean_settings, raw, clean_marker):
            stats = run_clean(clean, beam_argv, progress)
            clean_marker = _marker(paths.clean, STATS_FILE)
            record.finish("clean", clean_settings, raw, clean_marker)
            report(
                f"clean: {stats['documents_out']} of {stats['documents_in']} documents kept "
                f"-> {paths.clean}"
            )
            warning = language_warning(stats)
            if warning:
                print(f"clean: {warning}", file=sys.stderr)

        dedup = _with_paths(DedupConfig, config.dedup, inputs=[paths.clean], output=paths.docs)
        dedup_settings = _settings(dedup, "inputs", "output")
        docs_marker = _marker(paths.docs, STATS_FILE)
        upstream = _sha256(clean_marker) or ""
        if stage("dedup", dedup_settings, upstream, docs_marker):
            stats = run_dedup(dedup, beam_argv, progress)
            docs_marker = _marker(paths.docs, STATS_FILE)
            record.finish("dedup", dedup_settings, upstream, docs_marker)
            report(f"dedup: {stats['duplicates']} duplicates removed -> {paths.docs}")

        vocab = _with_paths(
            VocabRunConfig,
            config.sample,
            input=paths.docs,
            output=paths.tokenizer,
            vocab=config.vocab,
        )
        vocab_settings = _settings(vocab, "input", "output")
        tokenizer_marker = BEAM_FS.join(paths.tokenizer, TOKENIZER_FILE)
        upstream = _sha256(docs_marker) or ""
        if stage("vocab", vocab_settings, upstream, tokenizer_marker):
            # Progress is not a setting: the stage's record does not hear of it.
            stats = run_vocab(vocab, beam_argv, progress)
            record.finish("vocab", vocab_settings, upstream, tokenizer_marker)
            report(f"vocab: {stats['kind']}, {stats['vocab_size']} tokens -> {paths.tokenizer}")

        shard = _with_paths(
            ShardConfig,
            config.shard,
            input=paths.docs,
            tokenizer=paths.tokenizer,
            output=paths.shards,
        )
        shard_settings = _settings(shard, "input", "tokenizer", "output")
        manifest_path = _marker(paths.shards, MANIFEST_FILE)
        upstream = f"{_sha256(docs_marker)}:{_sha256(tokenizer_marker)}"
        if stage("shard", shard_settings, upstream, manifest_path):
            manifest = run_shard(shard, beam_argv, progress)
            manifest_path = _marker(paths.shards, MANIFEST_FILE)
            record.finish("shard", shard_settings, upstream, manifest_path)
            report(
                f"shard: {manifest.sequences} sequences, {manifest.tokens} tokens in "
                f"{len(manifest.shards)} shards -> {paths.shards}"
            )
        else:
            with BEAM_FS.open(manifest_path) as f:
                manifest = Manifest.from_json(f.read().decode("utf-8"), source=manifest_path)
        return paths, manifest
