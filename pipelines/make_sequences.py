"""Document tables -> training sequences of every shard mode, as (bucket, SequenceBatch).

The Beam side of `corpus.shards.recipes`: a DoFn call tokenizes ~1 MB of text and makes
its sequences (tokenizer built once per worker); the grouped modes (full-sentences, nsp,
sso) send documents through one grouping by group first. What each step counted becomes
Beam counters, and from them the manifest's `stats`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.coders import VarIntCoder
from tokenizers import Tokenizer

from clozeworks.corpus.shards import recipes
from clozeworks.corpus.shards.instances import SequenceBatch
from clozeworks.corpus.shards.recipes import GroupPart, Recipe
from clozeworks.corpus.shards.tokenize import DocumentEncoder
from clozeworks.pipelines.plumbing.coders import ArraysCoder
from clozeworks.pipelines.plumbing.counters import counter
from clozeworks.pipelines.plumbing.shuffle import Shuffle

PART_CODER = ArraysCoder(GroupPart.to_arrays, GroupPart.from_arrays)
DOCS = "docs"


def _count(counts: recipes.Counts) -> None:
    for name, value in counts.items():
        counter(name).inc(value)


def _emit(bucketed: recipes.Bucketed) -> Iterator[tuple[int, SequenceBatch]]:
    counter("shard.sequences").inc(sum(len(batch) for _, batch in bucketed))
    yield from bucketed


class _SliceTable(beam.DoFn):
    """A Parquet record batch (pyarrow Table with `id` and `text`) -> (ids, texts) lists
    holding about TOKENIZE_BATCH_CHARS of text each. Reading whole row groups skips Beam's
    per-row dicts; how rows are sliced does not change the result."""

    def process(self, table: Any) -> Iterator[tuple[list[str], list[str]]]:
        yield from recipes.text_slices(
            table.column("id").to_pylist(), table.column("text").to_pylist()
        )


class _FromDocuments(beam.DoFn):
    """(ids, texts) -> (bucket, SequenceBatch); for the grouped modes, tokenized documents
    go to output `docs` instead, as (group, GroupPart)."""

    def __init__(self, tokenizer_json: str, recipe: Recipe) -> None:
        self.tokenizer_json = tokenizer_json
        self.recipe = recipe
        self.encoder: DocumentEncoder | None = None

    def setup(self) -> None:
        tok = Tokenizer.from_str(self.tokenizer_json)
        shard = self.recipe.shard
        self.encoder = DocumentEncoder(tok, shard.text_language, shard.sentence_splitter)

    def process(self, rows: tuple[list[str], list[str]]) -> Iterator[Any]:
        assert self.encoder is not None
        made = recipes.from_documents(self.recipe, self.encoder, *rows)
        _count(made.counts)
        yield from _emit(made.sequences)
        for part in made.parts:
            yield beam.pvalue.TaggedOutput(DOCS, part)


class _FromGroup(beam.DoFn):
    """(group, [GroupPart]) -> (bucket, SequenceBatch) of a whole group's documents."""

    def __init__(self, recipe: Recipe, source: str) -> None:
        self.recipe = recipe
        self.source = source

    def process(self, item: tuple[int, Iterable[GroupPart]]) -> Iterator[tuple[int, SequenceBatch]]:
        group, parts = item
        bucketed, counts = recipes.from_group(self.recipe, group, parts, self.source)
        _count(counts)
        yield from _emit(bucketed)


class SequencesFromGroups(beam.PTransform):
    """(group, GroupPart) parts -> (bucket, SequenceBatch): full-sentences streams, or
    nsp / sso pairs whose random segments come from the group's other documents."""

    def __init__(self, recipe: Recipe, source: str, shuffle: Shuffle | None = None) -> None:
        super().__init__()
        self.recipe = recipe
        self.source = source
        self.shuffle = shuffle or Shuffle()

    def expand(self, parts: Any) -> Any:
        return (
            parts
            | "GroupDocuments" >> self.shuffle.group_by_key("documents", VarIntCoder(), PART_CODER)
            | "MakeSequences" >> beam.ParDo(_FromGroup(self.recipe, self.source))
        )


class MakeSequences(beam.PTransform):
    """Parquet record batches of a document store -> (bucket, SequenceBatch) of the
    recipe's mode, not yet in any order."""

    def __init__(
        self, tokenizer_json: str, recipe: Recipe, source: str, shuffle: Shuffle | None = None
    ) -> None:
        super().__init__()
        self.tokenizer_json = tokenizer_json
        self.recipe = recipe
        self.source = source
        self.shuffle = shuffle or Shuffle()

    def expand(self, tables: Any) -> Any:
        made = (
            tables
            | "SliceDocuments" >> beam.ParDo(_SliceTable())
            | "TokenizeAndMake"
            >> beam.ParDo(_FromDocuments(self.tokenizer_json, self.recipe)).with_outputs(
                DOCS, main="sequences"
            )
        )
        if not self.recipe.grouped:
            return made.sequences
        step = "PackStreams" if self.recipe.shard.mode == "full-sentences" else "Pairs"
        return made.docs | step >> SequencesFromGroups(self.recipe, self.source, self.shuffle)
