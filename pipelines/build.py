"""`cloze build`: clean -> dedup -> vocab -> shard into ROOT/{clean,docs,tokenizer,shards}."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from corpus.vocab import VocabConfig
from pipelines.clean import CleanConfig, run_clean
from pipelines.dedup import DedupConfig, run_dedup
from pipelines.shard import ShardConfig, run_shard
from pipelines.vocab import VocabRunConfig, run_vocab
from schemas.manifest import Manifest


@dataclass
class BuildConfig:
    inputs: Sequence[str]
    root: str
    clean: dict[str, object] = field(default_factory=dict)
    vocab: VocabConfig = field(default_factory=VocabConfig)
    mode: str = "full-sentences"
    max_seq_len: int = 128
    seed: int = 12345
    sequences_per_shard: int | None = 8192


@dataclass
class BuildPaths:
    clean: str
    docs: str
    tokenizer: str
    shards: str

    @classmethod
    def under(cls, root: str) -> BuildPaths:
        r = Path(root)
        return cls(str(r / "clean"), str(r / "docs"), str(r / "tokenizer"), str(r / "shards"))


def run_build(
    config: BuildConfig,
    beam_argv: Sequence[str] = (),
    report: Callable[[str], None] = print,
) -> tuple[BuildPaths, Manifest]:
    """Run every stage in order; `report` hears one line per finished stage."""
    paths = BuildPaths.under(config.root)
    stats = run_clean(
        CleanConfig(inputs=config.inputs, output=paths.clean, **config.clean), beam_argv
    )  # type: ignore[arg-type]
    report(
        f"clean: {stats['documents_out']} of {stats['documents_in']} documents kept "
        f"-> {paths.clean}"
    )
    stats = run_dedup(DedupConfig(input=paths.clean, output=paths.docs), beam_argv)
    report(f"dedup: {stats['duplicates']} exact duplicates removed -> {paths.docs}")
    vocab = run_vocab(
        VocabRunConfig(input=paths.docs, output=paths.tokenizer, vocab=config.vocab), beam_argv
    )
    report(f"vocab: {vocab['kind']}, {vocab['vocab_size']} tokens -> {paths.tokenizer}")
    manifest = run_shard(
        ShardConfig(
            input=paths.docs,
            tokenizer=paths.tokenizer,
            output=paths.shards,
            mode=config.mode,
            max_seq_len=config.max_seq_len,
            seed=config.seed,
            sequences_per_shard=config.sequences_per_shard,
        ),
        beam_argv,
    )
    report(
        f"shard: {manifest.sequences} sequences, {manifest.tokens} tokens in "
        f"{len(manifest.shards)} shards -> {paths.shards}"
    )
    return paths, manifest
