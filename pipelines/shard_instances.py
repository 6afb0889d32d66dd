"""Document rows -> training sequences of every shard mode, as (bucket, SequenceBatch).

Work is done per batch of documents, not per document or per sequence: a DoFn call
tokenizes ~1 MB of text with one `encode_batch_fast` call (tokenizer built once per
worker), builds that text's sequences, and emits them as a few `SequenceBatch`es, one per
shuffle bucket, so Beam handles thousands of elements where there are millions of
sequences. FULL-SENTENCES packs documents' short tails together in hashed groups; pair
modes that draw random segments from other documents (nsp, sso) work on hashed groups of
about 2048 documents, each document's choices coming from an rng seeded by (seed, document
id, copy): the same pairs on every run, with any number of workers.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import numpy as np
from tokenizers import Tokenizer

from corpus import dealing
from corpus.instances import (
    SequenceBatch,
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
class InstanceSettings:
    mode: str
    max_seq_len: int
    seed: int
    specials: Specials
    token_dtype: str = "uint32"
    dupe_factor: int = 1
    short_seq_prob: float = 0.1
    language: str = "en"
    bucket_bits: int = dealing.DEFAULT_BUCKET_BITS
    documents: int = 0  # documents in the store (sizes the pair groups)

    @property
    def pair_groups(self) -> int:
        return max(1, self.documents // PAIR_GROUP_DOCS)


def _key(seed: int, identity: str, copy: int) -> int:
    return dealing.sequence_key(seed, f"{identity}\x00{copy}")


class _Collector:
    """Sequences gathered in a DoFn call, handed out as one SequenceBatch per bucket."""

    def __init__(self, s: InstanceSettings) -> None:
        self.s = s
        self.keys: list[int] = []
        self.seqs: list[np.ndarray] = []
        self.segments: list[int] = []
        self.labels: list[int] = []
        self.copies: list[int] = []

    def add(self, identity: str, tokens: np.ndarray, segment: int = -1, label: int = -1) -> None:
        for copy in range(self.s.dupe_factor):
            self.add_copy(identity, tokens, copy, segment, label)

    def add_copy(
        self, identity: str, tokens: np.ndarray, copy: int, segment: int = -1, label: int = -1
    ) -> None:
        self.keys.append(_key(self.s.seed, identity, copy))
        self.seqs.append(tokens)
        self.segments.append(segment)
        self.labels.append(label)
        self.copies.append(copy)

    def batches(self) -> Iterator[tuple[int, SequenceBatch]]:
        if not self.keys:
            return
        counter("shard.sequences").inc(len(self.keys))
        batch = SequenceBatch.build(
            self.keys, self.seqs, self.s.token_dtype, self.segments, self.labels, self.copies
        )
        buckets = dealing.buckets_of(batch.keys, self.s.bucket_bits)
        order = np.argsort(buckets, kind="stable")
        edges = np.flatnonzero(np.diff(buckets[order])) + 1
        for part in np.split(order, edges):
            yield int(buckets[part[0]]), batch.take(part)


class _SliceTable(beam.DoFn):
    """A Parquet record batch (pyarrow Table with `id` and `text`) -> lists of (id, text)
    holding about TOKENIZE_BATCH_CHARS of text each. Reading whole row groups skips Beam's
    per-row dicts; how rows are sliced does not change the result."""

    def process(self, table: Any) -> Iterator[list[tuple[str, str]]]:
        ids = table.column("id").to_pylist()
        texts = table.column("text").to_pylist()
        batch: list[tuple[str, str]] = []
        size = 0
        for doc_id, text in zip(ids, texts, strict=True):
            batch.append((doc_id, text))
            size += len(text)
            if size >= TOKENIZE_BATCH_CHARS:
                yield batch
                batch, size = [], 0
        if batch:
            yield batch


def _doc_id(item: tuple[str, Any]) -> str:
    return item[0]


class _BuildBatch(beam.DoFn):
    """[(doc id, text)] -> (bucket, SequenceBatch); FULL-SENTENCES tails go to `tails` and,
    for nsp / sso, tokenized documents to `docs`, each as (group, [(doc id, item)])."""

    TAILS = "tails"
    DOCS = "docs"

    def __init__(self, tokenizer_json: str, settings: InstanceSettings) -> None:
        self.tokenizer_json = tokenizer_json
        self.s = settings
        self.capacity = content_capacity(settings.max_seq_len)
        self.tok: Tokenizer | None = None
        self.docs_counter = counter("shard.documents")
        self.empty = counter("shard.documents_without_tokens")
        self.tokens = counter("shard.document_tokens")

    def setup(self) -> None:
        self.tok = Tokenizer.from_str(self.tokenizer_json)

    def process(self, rows: list[tuple[str, str]]) -> Iterator[Any]:
        assert self.tok is not None
        # SpanBERT's single segments ignore sentence boundaries: no splitter for them.
        split = self.s.mode != "single"
        docs = tokenize_documents(self.tok, [text for _, text in rows], split, self.s.language)
        self.docs_counter.inc(len(rows))
        out = _Collector(self.s)
        grouped: dict[int, list[tuple[str, Any]]] = defaultdict(list)
        counts = PairCounts()
        for (doc_id, _), doc in zip(rows, docs, strict=True):
            if len(doc) == 0:
                self.empty.inc()
                continue
            self.tokens.inc(doc.num_tokens)
            if self.s.mode in PACKED_MODES:
                self._pack(doc_id, doc, out, grouped)
            elif self.s.mode == "sop":
                _add_pairs(self.s, [doc.sentences()], [doc_id], out, counts)
            else:
                group = dealing.sequence_key(self.s.seed, f"pairgroup\x00{doc_id}")
                grouped[group % self.s.pair_groups].append((doc_id, doc))
        for group, items in sorted(grouped.items()):
            if self.s.mode in PACKED_MODES:
                # one array per call and group: Beam pickles a few arrays, not one per tail
                ids = [doc_id for doc_id, _ in items]
                tails = [tail for _, tail in items]
                yield beam.pvalue.TaggedOutput(self.TAILS, (group, (ids, *_flat(tails))))
            else:
                yield beam.pvalue.TaggedOutput(self.DOCS, (group, items))
        if self.s.mode == "sop":
            _count_pairs(counts)
        yield from out.batches()

    def _pack(
        self,
        doc_id: str,
        doc: TokenizedDoc,
        out: _Collector,
        tails: dict[int, list[tuple[str, Any]]],
    ) -> None:
        chunks = pack_document(doc.sentences(), self.capacity)
        for i, chunk in enumerate(chunks):
            last = i == len(chunks) - 1
            if last and self.s.mode == "full-sentences" and chunk_tokens(chunk) < self.capacity:
                group = dealing.sequence_key(self.s.seed, f"tail\x00{doc_id}") % TAIL_GROUPS
                tails[group].append((doc_id, np.concatenate(chunk)))
                continue
            out.add(f"{doc_id}\x00{i}", single_sequence(chunk, self.s.specials))


def _flat(arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum([len(a) for a in arrays], out=offsets[1:])
    return np.concatenate(arrays), offsets


TailPart = tuple[list[str], np.ndarray, np.ndarray]  # doc ids, their tails flat, offsets


class _PackTails(beam.DoFn):
    """(group, [TailPart]) -> sequences that may cross documents (FULL-SENTENCES)."""

    def __init__(self, settings: InstanceSettings) -> None:
        self.s = settings
        self.capacity = content_capacity(settings.max_seq_len)

    def process(self, item: tuple[int, Iterable[TailPart]]) -> Iterator[tuple[int, SequenceBatch]]:
        group, parts = item
        tails = [
            (doc_id, tokens[offsets[i] : offsets[i + 1]])
            for ids, tokens, offsets in parts
            for i, doc_id in enumerate(ids)
        ]
        tails.sort(key=_doc_id)  # by doc id: the same packing on every run
        packed = pack_across_documents(
            ([tail] for _, tail in tails), self.capacity, self.s.specials.sep
        )
        out = _Collector(self.s)
        for i, chunk in enumerate(packed):
            out.add(f"tails\x00{group}\x00{i}", single_sequence(chunk, self.s.specials))
        yield from out.batches()


def _add_pairs(
    s: InstanceSettings,
    docs: list[list[np.ndarray]],
    ids: Sequence[str],
    out: _Collector,
    counts: PairCounts,
    source: str = "",
) -> None:
    """Every copy of every document's pairs (each copy re-paired, as BERT's dupe_factor)."""
    labels = [0, 0, 0]
    for copy in range(s.dupe_factor):
        for index, doc_id in enumerate(ids):
            rng = random.Random(_key(s.seed, f"pairs\x00{doc_id}", copy))
            try:
                pairs = make_pairs(
                    docs, index, s.mode, s.max_seq_len, rng, counts, s.short_seq_prob
                )
            except ValueError as err:
                raise BadInputError(
                    f"{source}: cannot build {s.mode} pairs ({err}); random segments need a "
                    "corpus of at least two documents"
                ) from None
            for j, pair in enumerate(pairs):
                tokens, segment = pair_sequence(pair, s.specials)
                out.add_copy(f"pair\x00{doc_id}\x00{j}", tokens, copy, segment, pair.label)
                labels[pair.label] += 1
    for label, count in enumerate(labels):
        if count:
            counter(f"pairs.label_{label}").inc(count)


def _count_pairs(counts: PairCounts) -> None:
    for name, value in counts.as_counters().items():
        counter(name).inc(value)


class _MakePairs(beam.DoFn):
    """(group, [[(doc id, TokenizedDoc)]]) -> pair sequences with random segments drawn
    from the group's other documents; the counts of `corpus.pairs.PairCounts` as counters."""

    def __init__(self, settings: InstanceSettings, source: str) -> None:
        self.s = settings
        self.source = source

    def process(
        self, item: tuple[int, Iterable[list[tuple[str, TokenizedDoc]]]]
    ) -> Iterator[tuple[int, SequenceBatch]]:
        ordered = sorted((d for part in item[1] for d in part), key=_doc_id)
        docs = [doc.sentences() for _, doc in ordered]
        out = _Collector(self.s)
        counts = PairCounts()
        _add_pairs(self.s, docs, [i for i, _ in ordered], out, counts, self.source)
        _count_pairs(counts)
        yield from out.batches()


class PairsFromGroups(beam.PTransform):
    """(group, [(doc id, TokenizedDoc)]) parts -> (bucket, SequenceBatch) of nsp/sso pairs
    whose random segments come from the group's other documents."""

    def __init__(self, settings: InstanceSettings, source: str) -> None:
        super().__init__()
        self.s = settings
        self.source = source

    def expand(self, parts: Any) -> Any:
        return (
            parts
            | "GroupDocuments" >> beam.GroupByKey()
            | "MakePairs" >> beam.ParDo(_MakePairs(self.s, self.source))
        )


class BuildInstances(beam.PTransform):
    """Parquet record batches of a document store -> (bucket, SequenceBatch) of the
    configured mode, not yet in any order."""

    def __init__(self, tokenizer_json: str, settings: InstanceSettings, source: str) -> None:
        super().__init__()
        self.tokenizer_json = tokenizer_json
        self.s = settings
        self.source = source

    def expand(self, tables: Any) -> Any:
        built = (
            tables
            | "SliceDocuments" >> beam.ParDo(_SliceTable())
            | "TokenizeAndBuild"
            >> beam.ParDo(_BuildBatch(self.tokenizer_json, self.s)).with_outputs(
                _BuildBatch.TAILS, _BuildBatch.DOCS, main="sequences"
            )
        )
        if self.s.mode == "full-sentences":
            crossing = (
                built.tails
                | "GroupTails" >> beam.GroupByKey()
                | "PackTails" >> beam.ParDo(_PackTails(self.s))
            )
            return (built.sequences, crossing) | "AllSequences" >> beam.Flatten()
        if self.s.mode in ("nsp", "sso"):
            return built.docs | "Pairs" >> PairsFromGroups(self.s, self.source)
        return built.sequences
