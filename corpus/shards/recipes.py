"""How every shard mode makes its sequences from documents, as pure functions over batches.

Work is done per batch of documents, not per document or per sequence: a batch of ~1 MB of
text is tokenized with one `encode_batch_fast` call and its sequences built with array
arithmetic, then split into a few `SequenceBatch`es, one per shuffle bucket. Packed modes
that stay inside a document (doc-sentences, single) and sop make their sequences right
there; full-sentences packs a stream of documents (fairseq's `complete` blocks) and nsp /
sso draw random segments from other documents, both over hashed groups of about 2048
documents, so a batch's documents go to their group first (`GroupPart`). Every key and
random choice derives from the documents' keys (`corpus.shards.keys`): the same sequences
on every run, with any number of workers. Each function returns what it counted (a dict of
counter name to amount) beside what it made; the pipeline adds the counts up.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from clozeworks.corpus.shards import arrays, dealing, ranges
from clozeworks.corpus.shards import keys as rk
from clozeworks.corpus.shards.instances import (
    SequenceBatch,
    Specials,
    chunk_bounds,
    content_capacity,
    pack_stream,
    single_sequences,
)
from clozeworks.corpus.shards.pairs import (
    NUM_LABELS,
    PairCounts,
    PairSpans,
    make_pairs,
    pair_sequences,
)
from clozeworks.corpus.shards.settings import ShardSettings
from clozeworks.corpus.shards.tokenize import DocumentEncoder, TokenizedBatch
from clozeworks.schemas.errors import BadInputError

# Documents per group that random segments are drawn from (nsp, sso), or that are packed
# as one stream (full-sentences): large enough that a draw from the group is as good as a
# draw from the corpus and that a stream breaks once in 2048 documents, small enough to
# hold in one worker.
GROUP_DOCS = 2048
# Text per encode_batch_fast call; the Rust side splits a batch over every core.
TOKENIZE_BATCH_CHARS = 1 << 20
# Counter name prefix of the sentences each encoder (package, version, way) encoded.
ENCODER_COUNTER = "shard.encoded_by."
# What a key is derived for (corpus.shards.keys.derive's first field after the document key).
_CHUNK, _STREAM_GROUP, _PAIR_GROUP, _PAIR = range(4)

Counts = dict[str, int]
Bucketed = list[tuple[int, SequenceBatch]]


@dataclass(frozen=True)
class Recipe:
    """A shard set's settings with what the tokenizer and the store add to them."""

    shard: ShardSettings
    specials: Specials
    token_dtype: str = "uint32"
    bucket_bits: int = dealing.DEFAULT_BUCKET_BITS
    documents: int = 0  # documents in the store (sizes the groups)
    # Per id, whether the piece begins a word: an over-long sentence is cut between words,
    # so a sequence does not begin with a `##` piece. None: cut every `capacity` tokens.
    word_start: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def cut(self) -> bool:
        """Whether an over-long sentence is cut into pieces (packed modes), not left out."""
        return self.shard.packing_rules == "clozeworks"

    @property
    def groups(self) -> int:
        return max(1, self.documents // GROUP_DOCS)

    @property
    def capacity(self) -> int:
        return content_capacity(self.shard.max_seq_len)

    @property
    def grouped(self) -> bool:
        """Whether documents go to groups before they make sequences."""
        return self.shard.mode in ("full-sentences", "nsp", "sso")


@dataclass(frozen=True)
class GroupPart:
    """Documents on their way to a group: their ids, keys and tokens."""

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


@dataclass
class Made:
    """What a batch of documents made: sequences by shuffle bucket, documents by group (the
    grouped modes), and the counts."""

    sequences: Bucketed = field(default_factory=list)
    parts: list[tuple[int, GroupPart]] = field(default_factory=list)
    counts: Counts = field(default_factory=dict)


def text_slices(
    ids: list[str], texts: list[str], chars: int = TOKENIZE_BATCH_CHARS
) -> Iterator[tuple[list[str], list[str]]]:
    """(ids, texts) slices of about `chars` characters each, in order."""
    sizes = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
    lo = 0
    while lo < len(texts):
        done = sizes[lo - 1] if lo else 0
        hi = int(np.searchsorted(sizes, done + chars)) + 1
        yield ids[lo:hi], texts[lo:hi]
        lo = hi


def from_documents(r: Recipe, encoder: DocumentEncoder, ids: list[str], texts: list[str]) -> Made:
    """Tokenize a batch of documents and make what they make without other documents:
    the sequences of doc-sentences, single and sop, or the grouped modes' group parts."""
    # SpanBERT's single segments ignore sentence boundaries: no splitter for them.
    batch = encoder.encode(texts, split=r.shard.mode != "single")
    # The shard's dtype from here on: half the bytes through packing and the shuffles.
    batch = batch.narrowed(r.token_dtype)
    sizes = np.diff(batch.token_bounds())
    counts = {
        "shard.documents": len(ids),
        "shard.documents_without_tokens": int((sizes == 0).sum()),
        "shard.document_tokens": int(sizes.sum()),
    }
    # Which encoder made the ids, in sentences (texts): the manifest's record of it.
    counts.update({f"{ENCODER_COUNTER}{label}": n for label, n in encoder.take_counts().items()})
    keys = rk.string_keys(r.shard.seed, ids)
    if r.shard.mode in ("doc-sentences", "single"):
        made, more = packed(r, keys, batch)
        return Made(by_bucket(r, made), [], _sum(counts, more))
    if r.shard.mode == "sop":
        made, more = pairs(r, batch, keys, "")
        return Made(by_bucket(r, made), [], _sum(counts, more))
    docs = np.flatnonzero(sizes > 0)
    kind = _STREAM_GROUP if r.shard.mode == "full-sentences" else _PAIR_GROUP
    groups = rk.derive(keys[docs], kind) % np.uint64(r.groups)
    doc_ids = [ids[i] for i in docs.tolist()]
    return Made([], group_parts(doc_ids, keys[docs], batch.select(docs), groups), counts)


def group_parts(
    ids: list[str], keys: np.ndarray, docs: TokenizedBatch, groups: np.ndarray
) -> list[tuple[int, GroupPart]]:
    """(group, GroupPart) per group: one per batch and group, so a few arrays travel, not
    one object per document."""
    return [
        (group, GroupPart([ids[i] for i in mine.tolist()], keys[mine], docs.select(mine)))
        for group, mine in split_by(groups)
    ]


def packed(
    r: Recipe, keys: np.ndarray, batch: TokenizedBatch
) -> tuple[list[SequenceBatch], Counts]:
    """doc-sentences and single: each document's chunks (fairseq's `complete_doc`, or
    SpanBERT's pieces), every dupe-factor copy."""
    bounds = chunk_bounds(batch, r.capacity, r.cut, r.word_start)
    starts, ends = bounds[:-1], bounds[1:]
    doc = np.searchsorted(batch.token_bounds(), starts, side="right") - 1
    number = np.arange(len(doc)) - np.searchsorted(doc, doc)  # chunk number in its document
    fits = np.flatnonzero(ends - starts <= r.capacity)
    starts, ends, doc, number = starts[fits], ends[fits], doc[fits], number[fits]
    tokens, seq_bounds = single_sequences(batch.ids, starts, ends, r.specials)
    docs = one_each(keys[doc]) if r.shard.provenance else None
    made = copies(r, keys[doc], (_CHUNK, number), tokens, seq_bounds, docs)
    return made, left_out(batch, r.capacity, r.cut)


def stream(r: Recipe, group: int, parts: Iterable[GroupPart]) -> tuple[list[SequenceBatch], Counts]:
    """full-sentences: a group's documents packed as one stream in document-key order
    (`corpus.shards.instances.pack_stream`), every dupe-factor copy."""
    gathered = GroupPart.gather(parts)  # by document key: the same stream every run
    docs = gathered.docs
    tokens_in, lo, hi = pack_stream(docs, r.capacity, r.specials.sep, r.cut, r.word_start)
    tokens, bounds = single_sequences(tokens_in, lo, hi, r.specials)
    base = np.array([rk.string_key(r.shard.seed, f"stream\x00{group}")], dtype=np.uint64)
    held = stream_documents(docs, gathered.keys, lo, hi) if r.shard.provenance else None
    made = copies(r, base, (np.arange(len(lo)),), tokens, bounds, held)
    return made, left_out(docs, r.capacity, r.cut)


def one_each(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Provenance of sequences that each hold one document, whose keys are `keys`."""
    return keys, np.arange(len(keys) + 1, dtype=np.int64)


def stream_documents(
    docs: TokenizedBatch, keys: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The documents each of `pack_stream`'s blocks `stream[lo:hi]` holds tokens of, in
    order: (their keys, offsets). The stream has a separator between documents with tokens,
    so the k-th of them spans `[start + k, end + k)` of its own token range."""
    bounds = docs.token_bounds()
    filled = np.flatnonzero(np.diff(bounds) > 0)
    shift = np.arange(len(filled), dtype=np.int64)
    starts, ends = bounds[filled] + shift, bounds[filled + 1] + shift
    first = np.searchsorted(ends, lo, side="right")  # the first document ending past lo
    last = np.searchsorted(starts, hi, side="left") - 1  # the last one starting before hi
    counts = np.maximum(last - first + 1, 0)
    held = filled[ranges.range_positions(first, counts)]
    return keys[held], ranges.offsets(counts)


def pairs(
    r: Recipe, docs: TokenizedBatch, keys: np.ndarray, source: str
) -> tuple[list[SequenceBatch], Counts]:
    """Every copy of every document's pairs (each copy re-paired, as BERT's dupe_factor),
    with the counts of `corpus.shards.pairs.PairCounts` and each label's."""
    s = r.shard
    counted = PairCounts()
    labels = np.zeros(NUM_LABELS[s.mode], dtype=np.int64)
    out = []
    for copy in range(s.dupe_factor):
        try:
            spans = make_pairs(
                docs, keys, s.mode, s.max_seq_len, copy, counted, s.short_seq_prob, s.pair_rules
            )
        except ValueError as err:
            raise BadInputError(
                f"{source}: cannot build {s.mode} pairs ({err}); random segments need a "
                "corpus of at least two documents"
            ) from None
        tokens, bounds, segments = pair_sequences(docs.ids, spans, r.specials)
        pair_keys = rk.derive(keys[spans.doc], _PAIR, spans.step, copy)
        held = pair_documents(keys, spans) if s.provenance else None
        out.append(
            SequenceBatch.of(
                pair_keys, tokens, bounds, r.token_dtype, copy, segments, spans.label, held
            )
        )
        labels += np.bincount(spans.label, minlength=len(labels))
    counts = {f"pairs.label_{label}": n for label, n in enumerate(labels.tolist()) if n}
    return out, {**counts, **counted.as_counters()}


def pair_documents(keys: np.ndarray, spans: PairSpans) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's document, then the one its random B came from (if any): (keys, offsets)."""
    borrowed = spans.random_doc >= 0
    offsets = ranges.offsets(1 + borrowed.astype(np.int64))
    held = np.empty(offsets[-1], dtype=np.uint64)
    held[offsets[:-1]] = keys[spans.doc]
    held[offsets[:-1][borrowed] + 1] = keys[spans.random_doc[borrowed]]
    return held, offsets


def from_group(
    r: Recipe, group: int, parts: Iterable[GroupPart], source: str
) -> tuple[Bucketed, Counts]:
    """The sequences of a grouped mode from a whole group's documents."""
    if r.shard.mode == "full-sentences":
        made, counts = stream(r, group, parts)
    else:
        gathered = GroupPart.gather(parts)
        made, counts = pairs(r, gathered.docs, gathered.keys, source)
    return by_bucket(r, made), counts


def copies(
    r: Recipe,
    keys: np.ndarray,
    fields: tuple[int | np.ndarray, ...],
    tokens: np.ndarray,
    bounds: np.ndarray,
    docs: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[SequenceBatch]:
    """The sequences once per dupe-factor copy, copy c keyed by `derive(keys, *fields, c)`;
    `docs`: the documents each holds, when recorded."""
    return [
        SequenceBatch.of(
            rk.derive(keys, *fields, copy), tokens, bounds, r.token_dtype, copy, docs=docs
        )
        for copy in range(r.shard.dupe_factor)
    ]


def by_bucket(r: Recipe, batches: list[SequenceBatch]) -> Bucketed:
    """(bucket, SequenceBatch) for every shuffle bucket the sequences fall in."""
    if not batches:
        return []
    batch = SequenceBatch.concat(batches)
    return [
        (bucket, batch.take(part))
        for bucket, part in split_by(dealing.buckets_of(batch.keys, r.bucket_bits))
    ]


def split_by(values: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(value, the indices holding it) for every distinct value, smallest first."""
    order = np.argsort(values, kind="stable")
    for part in np.split(order, np.flatnonzero(np.diff(values[order])) + 1):
        if len(part):
            yield int(values[part[0]]), part


def left_out(batch: TokenizedBatch, capacity: int, cut: bool) -> Counts:
    """Packing's reference rules leave out each sentence longer than a sequence: counted."""
    if cut:
        return {}
    lengths = np.diff(batch.sentences)
    long = lengths[lengths > capacity]
    if not len(long):
        return {}
    return {
        "shard.long_sentences_left_out": len(long),
        "shard.long_sentence_tokens_left_out": int(long.sum()),
    }


def _sum(a: Counts, b: Counts) -> Counts:
    return {k: a.get(k, 0) + b.get(k, 0) for k in a.keys() | b.keys()}
