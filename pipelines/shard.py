"""`cloze shard`: a document store + a tokenizer -> WebDataset shards and `.manifest.json`.

Plan (`plan_shards`: what the tokenizer and the store add to the settings), graph
(`BuildShards`: Read -> MakeSequences -> DealToShards, a global shuffle that leaves shard
sizes within one sequence of each other -> WriteShards, blocks and for `--premask` the
static masks, written under temporary names and renamed), commit (the tokenizer copied
beside the shards, the manifest written last). Output goes through Beam's FileSystems, so
`--output` may be local or gs://, s3://, ...
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np

from clozeworks.corpus.outputs import check_apart
from clozeworks.corpus.shards import dealing
from clozeworks.corpus.shards.blocks import prepare_output_dir, write_manifest
from clozeworks.corpus.shards.instances import Specials
from clozeworks.corpus.shards.provenance import PROVENANCE_GLOB
from clozeworks.corpus.shards.recipes import Recipe
from clozeworks.corpus.shards.settings import ShardSettings, store_language
from clozeworks.corpus.vocab.files import read_token_counts
from clozeworks.corpus.vocab.train import TokenizerInfo, load_tokenizer
from clozeworks.pipelines.deal import DealToShards
from clozeworks.pipelines.make_sequences import MakeSequences
from clozeworks.pipelines.plumbing.beamfs import BEAM_FS
from clozeworks.pipelines.plumbing.progress import Bar
from clozeworks.pipelines.plumbing.shuffle import Shuffle
from clozeworks.pipelines.plumbing.stage import StageRun
from clozeworks.pipelines.provenance import WriteProvenance
from clozeworks.pipelines.read_store import (
    DOCUMENTS_READ,
    ReadDocumentTables,
    local_tokenizer,
    read_store_stats,
    store_totals,
)
from clozeworks.pipelines.write_shards import (
    SEQUENCES_WRITTEN,
    MaskSpec,
    WriteShards,
    mask_spec,
    read_infos,
)
from clozeworks.schemas.errors import BadInputError
from clozeworks.schemas.manifest import Manifest
from clozeworks.schemas.manifest import token_dtype_for as _dtype
from clozeworks.schemas.sidecars import PROVENANCE_DIR, TOKENIZER_DIR, names_of
from clozeworks.schemas.stats import StoreStats

__all__ = ["BuildShards", "ShardConfig", "plan_shards", "run_shard"]


@dataclass(frozen=True, kw_only=True)
class ShardConfig(ShardSettings):
    """The shard settings, and where: a document store, a tokenizer, an output directory."""

    input: str
    tokenizer: str
    output: str


@dataclass(frozen=True)
class ShardPlan:
    recipe: Recipe
    info: TokenizerInfo
    text_bytes: int  # about how much text the store holds (sizes the groupings)
    mask: MaskSpec | None


def plan_shards(
    config: ShardConfig,
    info: TokenizerInfo,
    store: StoreStats,
    text_bytes: int,
    counts: list[int] | None = None,
) -> ShardPlan:
    """What the tokenizer, the store (its .stats.json and about how much text it holds) and
    the tokenizer's token counts add to the settings. Pure: no files are touched."""
    recipe = Recipe(
        shard=config,
        specials=Specials(cls=info.special_ids["cls"], sep=info.special_ids["sep"]),
        token_dtype=_dtype(info.vocab_size),
        # Sized from the store's text; neither changes which shards come out.
        bucket_bits=dealing.bucket_bits_for(text_bytes * config.dupe_factor),
        documents=store.documents_out,
        word_start=np.asarray(info.word_start_table(), dtype=bool),
    )
    mask = mask_spec(config, info, counts)
    return ShardPlan(recipe, info, text_bytes * config.dupe_factor, mask)


class BuildShards(beam.PTransform):
    """A document store's record batches -> shard files in `output`, each shard's manifest
    entry recorded in `staging`."""

    def __init__(
        self, config: ShardConfig, plan: ShardPlan, output: str, staging: str, shuffle: Shuffle
    ) -> None:
        super().__init__()
        self.config = config
        self.plan = plan
        self.output = output
        self.staging = staging
        self.shuffle = shuffle

    def expand(self, tables: Any) -> Any:
        config, recipe = self.config, self.plan.recipe
        # (bucket, SequenceBatch): training sequences, [CLS] ... [SEP], in no order yet.
        batches = tables | "MakeSequences" >> MakeSequences(
            self.plan.info.tokenizer.to_str(), recipe, config.input, self.shuffle
        )
        # (shard, [(positions, SequenceBatch)]): shuffled across the whole corpus.
        dealt = batches | "Deal" >> DealToShards(
            config.num_shards, config.sequences_per_shard, self.shuffle
        )
        write = WriteShards(
            self.output,
            self.staging,
            config.block_size,
            recipe.token_dtype,
            config.pairs,
            self.plan.mask,
        )
        return dealt | "Write" >> write


def run_shard(
    config: ShardConfig, beam_argv: Sequence[str] = (), progress: bool = False
) -> Manifest:
    """Build the shard set; returns the manifest written last into `config.output`. With
    `progress`, bars on stderr while it runs on this machine."""
    config.validate()
    check_apart(
        {"output": config.output}, {"input": [config.input], "tokenizer": [config.tokenizer]}
    )
    # A tokenizer on an object store is read from a local copy, kept until the commit.
    with (
        StageRun(beam_argv, progress, "shard") as run,
        tempfile.TemporaryDirectory(prefix="cloze-tokenizer-") as tmp,
    ):
        # not the tokenizer: it goes with the job, by value
        run.require_reach([config.input], {"output": config.output})
        if config.premask:  # the workers draw the masks with the trainer's code
            run.require_worker_packages(
                "premask", ["torch", "numba"], "requirements-dataflow-premask.txt has them"
            )
        info = load_tokenizer(local_tokenizer(config.tokenizer, tmp))
        store = read_store_stats(config.input)
        if config.language is None:  # the store's, recorded in the manifest as resolved
            config = dataclasses.replace(config, language=store_language(store))
        # Stores written before dedup counted bytes have no bytes_out: estimate from footers.
        text_bytes = store.bytes_out or store_totals(config.input)[1]
        counts = read_token_counts(info.path, info.vocab_size) if config.premask else None
        plan = plan_shards(config, info, store, text_bytes, counts)
        run.lock(config.output)
        out = prepare_output_dir(config.output, BEAM_FS)
        staging = run.stage(out)
        # Buckets sized by the text: its token ids take fewer bytes than it does.
        shuffle = run.shuffle(BEAM_FS.join(staging, "shuffle"), plan.text_bytes)
        bars = [
            Bar(DOCUMENTS_READ, "read", plan.recipe.documents or None),
            Bar(SEQUENCES_WRITTEN, "sequences", unit="seqs"),
        ]
        with run.progress(bars), run.pipeline() as p:
            # pyarrow Tables: whole row groups of the store, never one dict per document.
            tables = p | "Read" >> ReadDocumentTables(config.input, ["id", "text"])
            _ = tables | "BuildShards" >> BuildShards(config, plan, out, staging, shuffle)
            if config.provenance:
                staged = BEAM_FS.join(staging, "provenance")
                _ = p | "Provenance" >> WriteProvenance(config.input, staged, config.seed)
        infos = read_infos(staging)
        if not infos:
            raise BadInputError(f"{config.input}: no text to make sequences from")
        run.check_locks()
        _place_provenance(BEAM_FS.join(staging, "provenance"), out, config.provenance)
        BEAM_FS.remove_tree(staging)
        return _commit(config, plan, out, infos, run.counters)


def _place_provenance(staged: str, out: str, made: bool) -> None:
    """The new provenance table in place of the old one (none when not `made`): before the
    manifest, which is written last."""
    target = BEAM_FS.join(out, PROVENANCE_DIR)
    BEAM_FS.remove_tree(target)
    if not made:
        return
    parts = BEAM_FS.match(BEAM_FS.join(staged, PROVENANCE_GLOB))
    BEAM_FS.mkdirs(target)
    BEAM_FS.rename(parts, [BEAM_FS.join(target, p.rsplit("/", 1)[-1]) for p in parts])


def _commit(
    config: ShardConfig, plan: ShardPlan, out: str, infos: list[Any], counters: dict[str, int]
) -> Manifest:
    """The tokenizer beside the shards, then the manifest, last."""
    info = plan.info
    tokenizer_dir = BEAM_FS.join(out, TOKENIZER_DIR)
    for name in names_of(TOKENIZER_DIR):  # an earlier, different tokenizer must not linger
        BEAM_FS.remove_tree(BEAM_FS.join(out, name))
    _copy_tokenizer(info, tokenizer_dir)
    manifest = Manifest(
        mode=config.mode,
        max_seq_len=config.max_seq_len,
        block_size=config.block_size,
        token_dtype=plan.recipe.token_dtype,
        vocab_size=info.vocab_size,
        vocab_kind=info.kind,
        tokenizer_sha256=info.sha256,
        special_tokens=dict(info.special_ids),
        seed=config.seed,
        premask=config.masking(),
        dupe_factor=config.dupe_factor,
        settings=config.build_settings(),
        stats=counters,
        shards=tuple(infos),
        created_by=_created_by(),
    )
    write_manifest(out, manifest, BEAM_FS)
    return manifest


def _copy_tokenizer(info: TokenizerInfo, directory: str) -> None:
    """The tokenizer files a shard set keeps beside itself, written through Beam's
    FileSystems; a plain vocab.txt is saved as tokenizer.json + vocab.txt."""
    BEAM_FS.mkdirs(directory)
    src = Path(info.path)
    if src.name.endswith(".txt"):
        files = {"tokenizer.json": info.tokenizer.to_str().encode(), "vocab.txt": src.read_bytes()}
    else:
        files = {
            f.name: f.read_bytes()
            for f in sorted(src.parent.iterdir())
            if f.is_file() and f.suffix in (".json", ".txt")
        }
    for name, data in files.items():
        with BEAM_FS.create(BEAM_FS.join(directory, name)) as f:
            f.write(data)


def _created_by() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"clozeworks {version('clozeworks')}"
    except PackageNotFoundError:
        return "clozeworks"
