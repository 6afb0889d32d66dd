"""Document rows -> training sequences of every shard mode, as (bucket, SequenceBatch).

Work is done per batch of documents, not per document or per sequence: a DoFn call
tokenizes ~1 MB of text with one `encode_batch_fast` call (tokenizer built once per
worker), builds that text's sequences with array arithmetic, and emits them as a few
`SequenceBatch`es, one per shuffle bucket, so Beam handles thousands of elements where
there are millions of sequences. FULL-SENTENCES packs a stream of documents (fairseq's
`complete` blocks), and the pair modes that draw random segments from other documents
(nsp, sso) draw them: both on hashed groups of about 2048 documents. Every key and random
choice derives from the documents' keys (`corpus.shards.keys`): the same sequences on every
run, with any number of workers.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.coders import VarIntCoder
from tokenizers import Tokenizer

from clozeworks.corpus.shards import arrays, dealing
from clozeworks.corpus.shards import keys as rk
from clozeworks.corpus.shards.instances import (
    SequenceBatch,
    Specials,
    chunk_bounds,
    content_capacity,
    pack_stream,
    single_sequences,
)
from clozeworks.corpus.shards.pairs import NUM_LABELS, PairCounts, make_pairs, pair_sequences
from clozeworks.corpus.shards.tokenize import DocumentEncoder, TokenizedBatch
from clozeworks.pipelines.coders import ArraysCoder
from clozeworks.pipelines.counters import counter
from clozeworks.pipelines.shuffle import Shuffle
from clozeworks.schemas.errors import BadInputError

# Documents per group that random segments are drawn from (nsp, sso), or that are packed
# as one stream (full-sentences): large enough that a draw from the group is as good as a
# draw from the corpus and that a stream breaks once in 2048 documents, small enough to
# hold in one worker.
GROUP_DOCS = 2048
# Text per encode_batch_fast call; the Rust side splits a batch over every core.
TOKENIZE_BATCH_CHARS = 1 << 20
# What a key is derived for (corpus.shards.keys.derive's first field after the document key).
_CHUNK, _STREAM_GROUP, _PAIR_GROUP, _PAIR = range(4)


@dataclass(frozen=True)
class InstanceSettings:
    mode: str
    max_seq_len: int
    seed: int
    specials: Specials
    token_dtype: str = "uint32"
    dupe_factor: int = 1
    short_seq_prob: float = 0.1
    pair_rules: str = "clozeworks"
    packing_rules: str = "clozeworks"
    language: str = "en"
    bucket_bits: int = dealing.DEFAULT_BUCKET_BITS
    documents: int = 0  # documents in the store (sizes the pair groups)

    @property
    def cut(self) -> bool:
        """Whether an over-long sentence is cut into pieces (packed modes), not left out."""
        return self.packing_rules == "clozeworks"

    @property
    def groups(self) -> int:
        return max(1, self.documents // GROUP_DOCS)


@dataclass(frozen=True)
class GroupPart:
    """Documents on their way to a group: their ids, keys and tokens (for FULL-SENTENCES
    tails, each document's tail as its one sentence)."""

    ids: list[str]
    keys: np.ndarray
    docs: TokenizedBatch

    def to_arrays(self) -> list[np.ndarray]:
        return [*arrays.strings_to_arrays(self.ids), self.keys, *self.docs.to_arrays()]

    @classmethod
    def from_arrays(cls, parts: Sequence[np.ndarray]) -> GroupPart:
        ids = arrays.arrays_to_strings(parts[0], parts[1])
        return cls(ids, parts[2], TokenizedBatch.from_arrays(parts[3:]))

    @classmethod
    def gather(cls, parts: Iterable[GroupPart]) -> GroupPart:
        """Every part's documents in key order (ids break a 64-bit tie): the same order
        however the parts arrived."""
        parts = list(parts)
        ids = [i for p in parts for i in p.ids]
        keys = np.concatenate([p.keys for p in parts])
        order = dealing.key_order(keys, functools.partial(_encoded, ids))
        docs = TokenizedBatch.concat([p.docs for p in parts]).select(order)
        return cls([ids[i] for i in order.tolist()], keys[order], docs)


def _encoded(ids: list[str]) -> list[bytes]:
    return [i.encode() for i in ids]


PART_CODER = ArraysCoder(GroupPart.to_arrays, GroupPart.from_arrays)


def _copies(
    s: InstanceSettings,
    keys: np.ndarray,
    fields: tuple[int | np.ndarray, ...],
    tokens: np.ndarray,
    bounds: np.ndarray,
) -> list[SequenceBatch]:
    """The sequences once per dupe-factor copy, copy c keyed by `derive(keys, *fields, c)`."""
    return [
        SequenceBatch.of(rk.derive(keys, *fields, copy), tokens, bounds, s.token_dtype, copy)
        for copy in range(s.dupe_factor)
    ]


def _split_by(values: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(value, the indices holding it) for every distinct value, smallest first."""
    order = np.argsort(values, kind="stable")
    for part in np.split(order, np.flatnonzero(np.diff(values[order])) + 1):
        if len(part):
            yield int(values[part[0]]), part


def _by_bucket(s: InstanceSettings, batches: list[SequenceBatch]) -> Iterator[Any]:
    """(bucket, SequenceBatch) for every shuffle bucket the sequences fall in."""
    if not batches:
        return
    batch = SequenceBatch.concat(batches)
    counter("shard.sequences").inc(len(batch))
    for bucket, part in _split_by(dealing.buckets_of(batch.keys, s.bucket_bits)):
        yield bucket, batch.take(part)


def _tagged(
    tag: str, ids: list[str], keys: np.ndarray, docs: TokenizedBatch, groups: np.ndarray
) -> Iterator[Any]:
    """(group, GroupPart) per group, as output `tag`: one per DoFn call and group, so Beam
    pickles a few arrays, not one object per document."""
    for group, mine in _split_by(groups):
        part = GroupPart([ids[i] for i in mine.tolist()], keys[mine], docs.select(mine))
        yield beam.pvalue.TaggedOutput(tag, (group, part))


class _SliceTable(beam.DoFn):
    """A Parquet record batch (pyarrow Table with `id` and `text`) -> (ids, texts) lists
    holding about TOKENIZE_BATCH_CHARS of text each. Reading whole row groups skips Beam's
    per-row dicts; how rows are sliced does not change the result."""

    def process(self, table: Any) -> Iterator[tuple[list[str], list[str]]]:
        ids = table.column("id").to_pylist()
        texts = table.column("text").to_pylist()
        sizes = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
        lo = 0
        while lo < len(texts):
            done = sizes[lo - 1] if lo else 0
            hi = int(np.searchsorted(sizes, done + TOKENIZE_BATCH_CHARS)) + 1
            yield ids[lo:hi], texts[lo:hi]
            lo = hi


class _BuildBatch(beam.DoFn):
    """(ids, texts) -> (bucket, SequenceBatch); for full-sentences, nsp and sso, tokenized
    documents go to `docs` instead, as (group, GroupPart)."""

    DOCS = "docs"

    def __init__(self, tokenizer_json: str, settings: InstanceSettings) -> None:
        self.tokenizer_json = tokenizer_json
        self.s = settings
        self.capacity = content_capacity(settings.max_seq_len)
        self.encoder: DocumentEncoder | None = None
        self.docs_counter = counter("shard.documents")
        self.empty = counter("shard.documents_without_tokens")
        self.tokens = counter("shard.document_tokens")

    def setup(self) -> None:
        self.encoder = DocumentEncoder(Tokenizer.from_str(self.tokenizer_json), self.s.language)

    def process(self, rows: tuple[list[str], list[str]]) -> Iterator[Any]:
        assert self.encoder is not None
        ids, texts = rows
        # SpanBERT's single segments ignore sentence boundaries: no splitter for them.
        batch = self.encoder.encode(texts, split=self.s.mode != "single")
        # The shard's dtype from here on: half the bytes through packing and the shuffles.
        batch = batch.narrowed(self.s.token_dtype)
        sizes = np.diff(batch.token_bounds())
        self.docs_counter.inc(len(ids))
        self.empty.inc(int((sizes == 0).sum()))
        self.tokens.inc(int(sizes.sum()))
        keys = rk.string_keys(self.s.seed, ids)
        if self.s.mode in ("doc-sentences", "single"):
            yield from self._packed(keys, batch)
        elif self.s.mode == "sop":
            yield from _by_bucket(self.s, _pair_batches(self.s, batch, keys, ""))
        else:
            docs = np.flatnonzero(sizes > 0)
            field = _STREAM_GROUP if self.s.mode == "full-sentences" else _PAIR_GROUP
            groups = rk.derive(keys[docs], field) % np.uint64(self.s.groups)
            doc_ids = [ids[i] for i in docs.tolist()]
            yield from _tagged(self.DOCS, doc_ids, keys[docs], batch.select(docs), groups)

    def _packed(self, keys: np.ndarray, batch: TokenizedBatch) -> Iterator[Any]:
        bounds = chunk_bounds(batch, self.capacity, self.s.cut)
        starts, ends = bounds[:-1], bounds[1:]
        doc = np.searchsorted(batch.token_bounds(), starts, side="right") - 1
        number = np.arange(len(doc)) - np.searchsorted(doc, doc)  # chunk number in its doc
        fits = np.flatnonzero(ends - starts <= self.capacity)
        _count_left_out(batch, self.capacity, self.s.cut)
        starts, ends, doc, number = starts[fits], ends[fits], doc[fits], number[fits]
        tokens, seq_bounds = single_sequences(batch.ids, starts, ends, self.s.specials)
        fields = (_CHUNK, number)
        yield from _by_bucket(self.s, _copies(self.s, keys[doc], fields, tokens, seq_bounds))


class _PackStream(beam.DoFn):
    """(group, [GroupPart]) -> FULL-SENTENCES blocks of the group's documents, packed as one
    stream in document-key order (`corpus.shards.instances.pack_stream`)."""

    def __init__(self, settings: InstanceSettings) -> None:
        self.s = settings
        self.capacity = content_capacity(settings.max_seq_len)

    def process(self, item: tuple[int, Iterable[GroupPart]]) -> Iterator[tuple[int, SequenceBatch]]:
        group, parts = item
        docs = GroupPart.gather(parts).docs  # by document key: the same stream every run
        stream, lo, hi = pack_stream(docs, self.capacity, self.s.specials.sep, self.s.cut)
        _count_left_out(docs, self.capacity, self.s.cut)
        tokens, bounds = single_sequences(stream, lo, hi, self.s.specials)
        base = np.array([rk.string_key(self.s.seed, f"stream\x00{group}")], dtype=np.uint64)
        fields = (np.arange(len(lo)),)
        yield from _by_bucket(self.s, _copies(self.s, base, fields, tokens, bounds))


def _count_left_out(batch: TokenizedBatch, capacity: int, cut: bool) -> None:
    """Packing's reference rules leave out each sentence longer than a sequence: counted."""
    if cut:
        return
    lengths = np.diff(batch.sentences)
    long = lengths[lengths > capacity]
    if len(long):
        counter("shard.long_sentences_left_out").inc(len(long))
        counter("shard.long_sentence_tokens_left_out").inc(int(long.sum()))


def _pair_batches(
    s: InstanceSettings, docs: TokenizedBatch, keys: np.ndarray, source: str
) -> list[SequenceBatch]:
    """Every copy of every document's pairs (each copy re-paired, as BERT's dupe_factor),
    with the counts of `corpus.shards.pairs.PairCounts` as counters."""
    counts = PairCounts()
    labels = np.zeros(NUM_LABELS[s.mode], dtype=np.int64)
    out = []
    for copy in range(s.dupe_factor):
        try:
            spans = make_pairs(
                docs, keys, s.mode, s.max_seq_len, copy, counts, s.short_seq_prob, s.pair_rules
            )
        except ValueError as err:
            raise BadInputError(
                f"{source}: cannot build {s.mode} pairs ({err}); random segments need a "
                "corpus of at least two documents"
            ) from None
        tokens, bounds, segments = pair_sequences(docs.ids, spans, s.specials)
        pair_keys = rk.derive(keys[spans.doc], _PAIR, spans.step, copy)
        out.append(
            SequenceBatch.of(pair_keys, tokens, bounds, s.token_dtype, copy, segments, spans.label)
        )
        labels += np.bincount(spans.label, minlength=len(labels))
    for label, count in enumerate(labels.tolist()):
        if count:
            counter(f"pairs.label_{label}").inc(count)
    for name, value in counts.as_counters().items():
        counter(name).inc(value)
    return out


class _MakePairs(beam.DoFn):
    """(group, [GroupPart]) -> pair sequences with random segments drawn from the group's
    other documents; the counts of `corpus.shards.pairs.PairCounts` as counters."""

    def __init__(self, settings: InstanceSettings, source: str) -> None:
        self.s = settings
        self.source = source

    def process(self, item: tuple[int, Iterable[GroupPart]]) -> Iterator[tuple[int, SequenceBatch]]:
        group = GroupPart.gather(item[1])
        yield from _by_bucket(self.s, _pair_batches(self.s, group.docs, group.keys, self.source))


class PairsFromGroups(beam.PTransform):
    """(group, GroupPart) parts -> (bucket, SequenceBatch) of nsp/sso pairs
    whose random segments come from the group's other documents."""

    def __init__(
        self, settings: InstanceSettings, source: str, shuffle: Shuffle | None = None
    ) -> None:
        super().__init__()
        self.s = settings
        self.source = source
        self.shuffle = shuffle or Shuffle()

    def expand(self, parts: Any) -> Any:
        return (
            parts
            | "GroupDocuments" >> self.shuffle.group_by_key("documents", VarIntCoder(), PART_CODER)
            | "MakePairs" >> beam.ParDo(_MakePairs(self.s, self.source))
        )


class BuildInstances(beam.PTransform):
    """Parquet record batches of a document store -> (bucket, SequenceBatch) of the
    configured mode, not yet in any order."""

    def __init__(
        self,
        tokenizer_json: str,
        settings: InstanceSettings,
        source: str,
        shuffle: Shuffle | None = None,
    ) -> None:
        super().__init__()
        self.tokenizer_json = tokenizer_json
        self.s = settings
        self.source = source
        self.shuffle = shuffle or Shuffle()

    def expand(self, tables: Any) -> Any:
        built = (
            tables
            | "SliceDocuments" >> beam.ParDo(_SliceTable())
            | "TokenizeAndBuild"
            >> beam.ParDo(_BuildBatch(self.tokenizer_json, self.s)).with_outputs(
                _BuildBatch.DOCS, main="sequences"
            )
        )
        if self.s.mode == "full-sentences":
            grouping = self.shuffle.group_by_key("documents", VarIntCoder(), PART_CODER)
            return (
                built.docs
                | "GroupDocuments" >> grouping
                | "PackStream" >> beam.ParDo(_PackStream(self.s))
            )
        if self.s.mode in ("nsp", "sso"):
            return built.docs | "Pairs" >> PairsFromGroups(self.s, self.source, self.shuffle)
        return built.sequences
