"""Document rows -> training sequences (`Instance`s) for every shard mode.

Tokenization runs on batches of documents (one `encode_batch_fast` call per ~1 MB of text)
in a DoFn that builds its tokenizer once per worker. Packed modes then work per document
(FULL-SENTENCES also packs document tails together in hashed groups); pair modes that draw
random segments from other documents work on hashed groups of documents, so a random B is
always a uniform draw from a few thousand other documents, chosen by an rng seeded from
(seed, document id, copy): the same pairs on every run, with any number of workers.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import numpy as np
from tokenizers import Tokenizer

from corpus import dealing
from corpus.instances import (
    Specials,
    chunk_tokens,
    content_capacity,
    pack_across_documents,
    pack_document,
    single_sequence,
)
from corpus.pairs import PairCounts, make_pairs, pair_sequence
from corpus.tokenize import TokenizedDoc, tokenize_documents
from pipelines.counters import counter
from schemas.errors import BadInputError

PACKED_MODES = ("full-sentences", "doc-sentences", "single")
PAIR_MODES = ("nsp", "sop", "sso")
# Tails of documents are packed together in this many groups (FULL-SENTENCES): enough to
# spread the work, few enough that most packed sequences come out full.
TAIL_GROUPS = 64
# Documents per group that random segments are drawn from: large enough that a draw from
# the group is as good as a draw from the corpus, small enough to hold in one worker.
PAIR_GROUP_DOCS = 2048
# Text per encode_batch_fast call; the Rust side splits a batch over every core.
TOKENIZE_BATCH_CHARS = 1 << 20


@dataclass(frozen=True)
class Instance:
    """One training sequence on its way to a shard.

    `key` orders the global shuffle (and, for pre-masked shards, seeds the mask); `copy`
    is the dupe-factor copy the sequence belongs to.
    """

    key: int
    tokens: np.ndarray
    segment: int = -1
    label: int = -1
    copy: int = 0


@dataclass(frozen=True)
class InstanceSettings:
    mode: str
    max_seq_len: int
    seed: int
    specials: Specials
    dupe_factor: int = 1
    short_seq_prob: float = 0.1
    language: str = "en"


def _key(seed: int, identity: str, copy: int) -> int:
    return dealing.sequence_key(seed, f"{identity}\x00{copy}")


def _text_chars(row: dict[str, Any]) -> int:
    return len(row["text"])


class _TokenizeBatch(beam.DoFn):
    """[document row] -> (doc id, TokenizedDoc) for each document with at least one token."""

    def __init__(self, tokenizer_json: str, split: bool, language: str) -> None:
        self.tokenizer_json = tokenizer_json
        self.split = split
        self.language = language
        self.tok: Tokenizer | None = None
        self.docs = counter("shard.documents")
        self.empty = counter("shard.documents_without_tokens")
        self.tokens = counter("shard.document_tokens")

    def setup(self) -> None:
        self.tok = Tokenizer.from_str(self.tokenizer_json)

    def process(self, rows: list[dict[str, Any]]) -> Iterator[tuple[str, TokenizedDoc]]:
        assert self.tok is not None
        docs = tokenize_documents(self.tok, [r["text"] for r in rows], self.split, self.language)
        self.docs.inc(len(rows))
        for row, doc in zip(rows, docs, strict=True):
            if len(doc) == 0:
                self.empty.inc()
                continue
            self.tokens.inc(doc.num_tokens)
            yield row["id"], doc


class Tokenize(beam.PTransform):
    """Document rows -> (doc id, TokenizedDoc); documents with no token are counted."""

    def __init__(self, tokenizer_json: str, split: bool, language: str) -> None:
        super().__init__()
        self.tokenizer_json = tokenizer_json
        self.split = split
        self.language = language

    def expand(self, rows: Any) -> Any:
        return (
            rows
            # Batches of about TOKENIZE_BATCH_CHARS of text; how rows are batched does not
            # change the result, only how well the Rust tokenizer can use the cores.
            | "BatchDocuments"
            >> beam.BatchElements(
                min_batch_size=1,
                max_batch_size=TOKENIZE_BATCH_CHARS,
                element_size_fn=_text_chars,
            )
            | "EncodeBatch"
            >> beam.ParDo(_TokenizeBatch(self.tokenizer_json, self.split, self.language))
        )


def _count_sequence() -> None:
    counter("shard.sequences").inc()


class _PackDocument(beam.DoFn):
    """(doc id, TokenizedDoc) -> full Instances; FULL-SENTENCES sends the last, short chunk
    to `tails` to be packed with other documents' tails."""

    TAILS = "tails"

    def __init__(self, settings: InstanceSettings) -> None:
        self.s = settings
        self.capacity = content_capacity(settings.max_seq_len)

    def process(self, item: tuple[str, TokenizedDoc]) -> Iterator[Any]:
        doc_id, doc = item
        chunks = pack_document(doc.sentences(), self.capacity)
        for i, chunk in enumerate(chunks):
            last = i == len(chunks) - 1
            if last and self.s.mode == "full-sentences" and chunk_tokens(chunk) < self.capacity:
                group = dealing.sequence_key(self.s.seed, f"tail\x00{doc_id}") % TAIL_GROUPS
                yield beam.pvalue.TaggedOutput(self.TAILS, (group, (doc_id, chunk)))
                continue
            tokens = single_sequence(chunk, self.s.specials)
            for copy in range(self.s.dupe_factor):
                _count_sequence()
                yield Instance(_key(self.s.seed, f"{doc_id}\x00{i}", copy), tokens, copy=copy)


def _doc_id(item: tuple[str, Any]) -> str:
    return item[0]


class _PackTails(beam.DoFn):
    """(group, [(doc id, chunk)]) -> Instances that may cross documents (FULL-SENTENCES)."""

    def __init__(self, settings: InstanceSettings) -> None:
        self.s = settings
        self.capacity = content_capacity(settings.max_seq_len)

    def process(
        self, item: tuple[int, Iterable[tuple[str, list[np.ndarray]]]]
    ) -> Iterator[Instance]:
        group, tails = item
        ordered = sorted(tails, key=_doc_id)  # by doc id: the same packing on every run
        packed = pack_across_documents((t[1] for t in ordered), self.capacity, self.s.specials.sep)
        for i, chunk in enumerate(packed):
            tokens = single_sequence(chunk, self.s.specials)
            for copy in range(self.s.dupe_factor):
                _count_sequence()
                key = _key(self.s.seed, f"tails\x00{group}\x00{i}", copy)
                yield Instance(key, tokens, copy=copy)


class PackedInstances(beam.PTransform):
    """(doc id, TokenizedDoc) -> Instances for full-sentences, doc-sentences and single."""

    def __init__(self, settings: InstanceSettings) -> None:
        super().__init__()
        self.s = settings

    def expand(self, docs: Any) -> Any:
        packed = docs | "PackDocuments" >> beam.ParDo(_PackDocument(self.s)).with_outputs(
            _PackDocument.TAILS, main="full"
        )
        if self.s.mode != "full-sentences":
            return packed.full
        crossing = (
            packed.tails
            | "GroupTails" >> beam.GroupByKey()
            | "PackTails" >> beam.ParDo(_PackTails(self.s))
        )
        return (packed.full, crossing) | "AllInstances" >> beam.Flatten()


class _KeyByPairGroup(beam.DoFn):
    def __init__(self, seed: int) -> None:
        self.seed = seed

    def process(
        self, item: tuple[str, TokenizedDoc], total: int
    ) -> Iterator[tuple[int, tuple[str, TokenizedDoc]]]:
        groups = max(1, total // PAIR_GROUP_DOCS)
        yield dealing.sequence_key(self.seed, f"pairgroup\x00{item[0]}") % groups, item


def _as_group(item: tuple[str, TokenizedDoc]) -> tuple[int, list[tuple[str, TokenizedDoc]]]:
    return 0, [item]


class _MakePairs(beam.DoFn):
    """(group, [(doc id, TokenizedDoc)]) -> pair Instances, every copy re-paired (as BERT's
    dupe_factor does), with the counts of `corpus.pairs.PairCounts` as counters."""

    def __init__(self, settings: InstanceSettings, source: str) -> None:
        self.s = settings
        self.source = source

    def process(self, item: tuple[int, Iterable[tuple[str, TokenizedDoc]]]) -> Iterator[Instance]:
        ordered = sorted(item[1], key=_doc_id)  # the same order on every run and worker
        docs = [doc.sentences() for _, doc in ordered]
        counts = PairCounts()
        labels = [0, 0, 0]
        for copy in range(self.s.dupe_factor):
            for index, (doc_id, _) in enumerate(ordered):
                rng = random.Random(_key(self.s.seed, f"pairs\x00{doc_id}", copy))
                try:
                    pairs = make_pairs(
                        docs,
                        index,
                        self.s.mode,
                        self.s.max_seq_len,
                        rng,
                        counts,
                        self.s.short_seq_prob,
                    )
                except ValueError as err:
                    raise BadInputError(
                        f"{self.source}: cannot build {self.s.mode} pairs ({err}); "
                        "random segments need a corpus of at least two documents"
                    ) from None
                for j, pair in enumerate(pairs):
                    tokens, segment = pair_sequence(pair, self.s.specials)
                    labels[pair.label] += 1
                    yield Instance(
                        _key(self.s.seed, f"pair\x00{doc_id}\x00{j}", copy),
                        tokens,
                        segment=segment,
                        label=pair.label,
                        copy=copy,
                    )
        counter("shard.sequences").inc(counts.sequences)
        for name, value in counts.as_counters().items():
            counter(name).inc(value)
        for label, value in enumerate(labels):
            if value:
                counter(f"pairs.label_{label}").inc(value)


class PairInstances(beam.PTransform):
    """(doc id, TokenizedDoc) -> pair Instances for nsp, sop and sso."""

    def __init__(self, settings: InstanceSettings, source: str) -> None:
        super().__init__()
        self.s = settings
        self.source = source

    def expand(self, docs: Any) -> Any:
        if self.s.mode == "sop":
            # Both segments come from the document itself: no grouping needed.
            groups = docs | "OneDocumentGroups" >> beam.Map(_as_group)
        else:
            # Documents that carry tokens, counted to size the groups.
            total = docs | "CountDocuments" >> beam.combiners.Count.Globally()
            groups = (
                docs
                | "KeyByGroup"
                >> beam.ParDo(_KeyByPairGroup(self.s.seed), beam.pvalue.AsSingleton(total))
                | "GroupDocuments" >> beam.GroupByKey()
            )
        return groups | "MakePairs" >> beam.ParDo(_MakePairs(self.s, self.source))


class BuildInstances(beam.PTransform):
    """Document rows -> Instances of the configured mode, not yet in any order."""

    def __init__(self, tokenizer_json: str, settings: InstanceSettings, source: str) -> None:
        super().__init__()
        self.tokenizer_json = tokenizer_json
        self.s = settings
        self.source = source

    def expand(self, rows: Any) -> Any:
        # SpanBERT's single segments ignore sentence boundaries, so they skip the splitter.
        split = self.s.mode != "single"
        docs = rows | "Tokenize" >> Tokenize(self.tokenizer_json, split, self.s.language)
        if self.s.mode in PAIR_MODES:
            return docs | "Pairs" >> PairInstances(self.s, self.source)
        return docs | "Pack" >> PackedInstances(self.s)
