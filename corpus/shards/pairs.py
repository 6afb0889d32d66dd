"""Sentence-pair instances: BERT's NSP, ALBERT's SOP and StructBERT's SSO.

The algorithm is BERT's `create_instances_from_document` (google-research/bert,
create_pretraining_data.py), read sentence by sentence:

- a target length is drawn once per document (and copy): the maximum (`max_seq_len - 3`
  content tokens), or with probability `short_seq_prob` (0.1) a uniform length in
  2..maximum, for every chunk of that document;
- sentences are gathered until the chunk reaches the target or the document ends;
  segment A is a random number of leading sentences of the chunk, B the rest;
- `nsp`: with p=0.5 B is replaced by sentences from another document, starting at a random
  sentence and running until B fills the target; the chunk's sentences that B did not use
  are put back and start the next chunk. `sop`: with p=0.5 A and B are swapped. `sso`:
  next / swapped / random, 1/3 each;
- the pair is cut to fit by removing tokens from the longer side (B on a tie, as
  `truncate_seq_pair` does), from the front or the back at random, and counted.

Three things differ from BERT, each so that labels mean what they say:

- the label is drawn before looking at the chunk. BERT makes every one-sentence chunk a
  random-next pair, which puts NSP negatives well above 50% on corpora of short documents
  and gives ALBERT's SOP negatives from other documents. Here a one-sentence chunk that
  needs its own continuation is cut at a random token into A and B; only a one-token chunk
  cannot be, and it becomes a random pair (nsp/sso, counted `forced_random`) or is dropped
  (sop, counted `dropped_tokens`);
- the random document is drawn from the other documents passed in, never the same one
  (BERT retries ten times and can still draw its own document);
- a sentence longer than the maximum is cut into maximum-length pieces first (counted
  `cut_sentences`) instead of being truncated away.

`rules="reference"` (`cloze shard --pair-rules reference`) restores BERT's first and
third behaviour. The second has no measurable effect: BERT retries ten times, and with
groups of at least 2048 documents it would keep its own document with probability
below 2048**-10.

How: all documents of a batch advance together, one chunk each per step, in numpy over
the documents that still have sentences left. Segments are contiguous ranges of the
batch's flat ids, so the work is on sentence lengths and a pair is four token offsets.
Every random choice is a counter-based hash of (document key, copy, step, what for)
(`corpus.shards.keys`): a document's pairs depend on its key, its sentences and the documents
passed with it, not on the order of work or the number of workers.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from clozeworks.corpus.shards import keys as rk
from clozeworks.corpus.shards import ranges
from clozeworks.corpus.shards.instances import Specials
from clozeworks.corpus.shards.tokenize import TokenizedBatch
from clozeworks.schemas.kinds import PAIR_MODES

# How many classes each mode's label has (see docs/design.md for their meaning).
NUM_LABELS = {"nsp": 2, "sop": 2, "sso": 3}
SHORT_SEQ_PROB = 0.1  # BERT's default
# "clozeworks": the label is drawn first and a one-sentence chunk that needs its own
# continuation is cut in two at a random token; a sentence longer than the maximum is cut
# into pieces. "reference": as BERT's and ALBERT's create_instances_from_document, a
# one-sentence chunk is always a random pair, an over-long sentence is kept whole and
# truncation cuts what does not fit.
PAIR_RULES = ("clozeworks", "reference")
# What each random draw of a step is for: one independent stream per purpose.
_PAIRS, _SHORT, _LENGTH, _LABEL, _CUT, _A_END, _OTHER, _START, _TRIM_A, _TRIM_B = range(10)


@dataclass
class PairCounts:
    """What building pairs did to the corpus; each field becomes a `pairs.*` counter."""

    sequences: int = 0
    truncated_sequences: int = 0
    own_tokens: int = 0  # tokens of the document placed in its own pairs
    own_tokens_truncated: int = 0  # tokens of the document cut off by truncation
    random_tokens: int = 0  # tokens of other documents placed as a random B
    random_tokens_truncated: int = 0
    split_sentences: int = 0  # one-sentence chunks cut into A and B
    cut_sentences: int = 0  # sentences longer than the maximum, cut into pieces
    forced_random: int = 0
    dropped_tokens: int = 0

    def add(self, other: PairCounts) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_counters(self) -> dict[str, int]:
        return {f"pairs.{f.name}": getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class PairSpans:
    """Pairs as ranges of a batch's `ids`, segments in the order they are stored: pair k is
    `ids[first_lo[k]:first_hi[k]]` then `ids[second_lo[k]:second_hi[k]]`. `doc` made it at
    its chunk number `step` ((doc, step) names a pair); `random_doc` is the document a
    random B came from, -1 where B is the document's own."""

    doc: np.ndarray
    step: np.ndarray
    first_lo: np.ndarray
    first_hi: np.ndarray
    second_lo: np.ndarray
    second_hi: np.ndarray
    label: np.ndarray
    random_doc: np.ndarray

    def __len__(self) -> int:
        return len(self.doc)

    @classmethod
    def concat(cls, parts: list[PairSpans]) -> PairSpans:
        if not parts:
            return cls(*[np.zeros(0, dtype=np.int64) for _ in fields(cls)])
        return cls(*[np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)])


def max_content_tokens(max_seq_len: int) -> int:
    """Tokens of A and B together: the length minus [CLS], [SEP], [SEP]."""
    if max_seq_len < 8:
        raise ValueError(f"max_seq_len must be at least 8, got {max_seq_len}")
    return max_seq_len - 3


def trims(a: np.ndarray, b: np.ndarray, max_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """Tokens BERT's `truncate_seq_pair` removes from A and from B: one at a time from the
    longer side (`tokens_a if len(tokens_a) > len(tokens_b) else tokens_b`: B on a tie)
    until both fit in `max_tokens`. The longer side loses the difference first, then the
    two take turns, B first."""
    excess = np.maximum(a + b - max_tokens, 0)
    uneven = np.minimum(excess, np.abs(a - b))
    turns = excess - uneven
    trim_a = np.where(a > b, uneven, 0) + turns // 2
    trim_b = np.where(a < b, uneven, 0) + (turns + 1) // 2
    return trim_a, trim_b


def make_pairs(
    batch: TokenizedBatch,
    keys: np.ndarray,
    mode: str,
    max_seq_len: int,
    copy: int,
    counts: PairCounts,
    short_seq_prob: float = SHORT_SEQ_PROB,
    rules: str = "clozeworks",
) -> PairSpans:
    """The pairs of every document of `batch` (whose keys are `keys`), for dupe-factor copy
    `copy`. A random B comes from another document of `batch`. ValueError if one is needed
    and there is no other document with a token. `rules="reference"`: BERT's and ALBERT's
    own handling of one-sentence chunks and over-long sentences (see PAIR_RULES)."""
    if mode not in PAIR_MODES:
        raise ValueError(f"unknown pair mode {mode!r}")
    if rules not in PAIR_RULES:
        raise ValueError(f"pair rules {rules!r} are not one of {', '.join(PAIR_RULES)}")
    reference = rules == "reference"
    max_tokens = max_content_tokens(max_seq_len)
    # The reference keeps an over-long sentence whole; truncation then cuts it to fit.
    limit = np.iinfo(np.int64).max // 4 if reference else max_tokens
    starts, doc_pieces = _pieces(batch, limit, counts)
    doc = np.flatnonzero(np.diff(doc_pieces) > 0)  # documents with pieces left
    piece = doc_pieces[doc]  # each one's next piece
    found: list[PairSpans] = []
    # derive(keys, _PAIRS, copy, step) is derive(derive(keys, _PAIRS, copy), step): the
    # first two fields once for the batch, not once per step.
    pair_keys = rk.derive(keys, _PAIRS, copy)
    # BERT draws the target length once per document, before its first chunk.
    first = _Draws(rk.derive(pair_keys[doc], 0))
    targets = np.zeros(len(keys), dtype=np.int64)
    targets[doc] = np.where(
        first.uniform(_SHORT) < short_seq_prob,
        2 + first.below(_LENGTH, max_tokens - 1),
        max_tokens,
    )
    step = 0
    while len(doc):
        draws = _Draws(rk.derive(pair_keys[doc], step))
        end = doc_pieces[doc + 1]
        target = targets[doc]
        # the chunk: pieces up to the first that reaches the target, or the document's last
        last = np.clip(np.searchsorted(starts, starts[piece] + target) - 1, piece, end - 1)
        label = draws.below(_LABEL, NUM_LABELS[mode])
        is_random = _is_random(mode, label)
        size = starts[piece + 1] - starts[piece]
        if reference:
            # BERT: `if len(current_chunk) == 1 or rng.random() < 0.5: is_random_next`;
            # ALBERT's SOP the same, a random B labelled "not in order" (1).
            lone = last == piece
            forced = lone & ~is_random
            label = np.where(lone, 1 if mode == "sop" else NUM_LABELS[mode] - 1, label)
            is_random |= lone
            split = dropped = np.zeros(len(doc), dtype=bool)
        else:
            alone = (last == piece) & ~is_random  # one piece that needs its own continuation
            split = alone & (size >= 2)
            dropped = alone & (size < 2) & (mode == "sop")
            forced = alone & (size < 2) & (mode != "sop")
            label = np.where(forced, NUM_LABELS[mode] - 1, label)
            is_random |= forced
        counts.split_sentences += int(split.sum())
        counts.forced_random += int(forced.sum())
        counts.dropped_tokens += int(size[dropped].sum())
        # A: a random number of leading pieces, or a lone piece's head cut at a random token
        count = last - piece + 1
        a_end = piece + np.where(count >= 2, 1 + draws.below(_A_END, np.maximum(count - 1, 1)), 1)
        cut = starts[piece] + 1 + draws.below(_CUT, np.maximum(size - 1, 1))
        a_lo = starts[piece]
        a_hi = np.where(split, cut, starts[a_end])
        # B: the rest of the chunk, or another document's pieces from a random start
        b_lo, b_hi = a_hi.copy(), starts[last + 1]
        other = np.full(len(doc), -1, dtype=np.int64)
        if is_random.any():
            r = np.flatnonzero(is_random)
            other[r] = _other_documents(draws.take(r), doc[r], doc_pieces)
            lo, hi = doc_pieces[other[r]], doc_pieces[other[r] + 1]
            first = lo + draws.take(r).below(_START, hi - lo)
            need = target[r] - (a_hi[r] - a_lo[r])
            b_end = np.clip(np.searchsorted(starts, starts[first] + need) - 1, first, hi - 1)
            b_lo[r], b_hi[r] = starts[first], starts[b_end + 1]
        k = np.flatnonzero(~dropped)
        segments = (a_lo[k], a_hi[k], b_lo[k], b_hi[k])
        found.append(
            _finish(draws.take(k), doc[k], step, segments, label[k], other[k], mode, max_tokens)
        )
        _count(found[-1], segments, counts)
        # next chunk: after it, or (random B) at the first piece B did not use
        piece = np.where(dropped, piece + 1, np.where(is_random, a_end, last + 1))
        left = piece < end
        doc, piece = doc[left], piece[left]
        step += 1
    return PairSpans.concat(found)


def pair_sequences(
    ids: np.ndarray, spans: PairSpans, specials: Specials
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`[CLS] first [SEP] second [SEP]` for every pair: (tokens, offsets, segments), the
    segment being the length of the first part with [CLS] and its [SEP]."""
    first = spans.first_hi - spans.first_lo
    second = spans.second_hi - spans.second_lo
    bounds = ranges.offsets(first + second + 3)
    start = bounds[:-1]
    tokens = np.empty(bounds[-1], dtype=ids.dtype)
    tokens[start] = specials.cls
    tokens[start + 1 + first] = specials.sep
    tokens[bounds[1:] - 1] = specials.sep
    tokens[ranges.range_positions(start + 1, first)] = ranges.gather(ids, spans.first_lo, first)
    tokens[ranges.range_positions(start + 2 + first, second)] = ranges.gather(
        ids, spans.second_lo, second
    )
    return tokens, bounds, first + 2


class _Draws:
    """Random numbers of one step, one per active document, a stream per purpose."""

    def __init__(self, base: np.ndarray) -> None:
        self.base = base

    def take(self, index: np.ndarray) -> _Draws:
        return _Draws(self.base[index])

    def uniform(self, purpose: int) -> np.ndarray:
        return rk.uniform(rk.derive(self.base, purpose))

    def below(self, purpose: int, n: int | np.ndarray) -> np.ndarray:
        return rk.below(rk.derive(self.base, purpose), n)

    def heads(self, purpose: int, flips: np.ndarray) -> np.ndarray:
        return rk.random_bits(rk.derive(self.base, purpose), flips)


def _pieces(batch: TokenizedBatch, limit: int, counts: PairCounts) -> tuple[np.ndarray, np.ndarray]:
    """Sentences cut into pieces of at most `limit` tokens: (where each piece starts in
    `batch.ids`, then the total; each document's first piece, then the total)."""
    lengths = np.diff(batch.sentences)
    per_sentence = -(-lengths // limit)
    counts.cut_sentences += int((per_sentence > 1).sum())
    first = ranges.offsets(per_sentence)
    sentence = np.repeat(np.arange(len(lengths)), per_sentence)
    within = np.arange(first[-1]) - first[sentence]
    sizes = np.minimum(limit, lengths[sentence] - within * limit)
    return ranges.offsets(sizes), first[batch.documents]


def _is_random(mode: str, label: np.ndarray) -> np.ndarray:
    if mode == "nsp":
        return label == 1
    if mode == "sso":
        return label == 2
    return np.zeros(len(label), dtype=bool)


def _other_documents(draws: _Draws, doc: np.ndarray, doc_pieces: np.ndarray) -> np.ndarray:
    """A document other than `doc`, uniformly, per pair."""
    candidates = len(doc_pieces) - 2
    if candidates < 1:
        raise ValueError("a random next segment needs a second document, and there is none")
    other = draws.below(_OTHER, candidates)
    other += other >= doc  # uniform over every document but this one
    empty = np.flatnonzero(doc_pieces[other + 1] == doc_pieces[other])
    if len(empty):
        raise ValueError(f"document {other[empty[0]]} has no sentence to draw a segment from")
    return other


def _finish(
    draws: _Draws,
    doc: np.ndarray,
    step: int,
    segments: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    label: np.ndarray,
    other: np.ndarray,
    mode: str,
    max_tokens: int,
) -> PairSpans:
    """Truncate (token by token from a random end: a binomial count from the front) and
    swap where the label says so."""
    a_lo, a_hi, b_lo, b_hi = segments
    trim_a, trim_b = trims(a_hi - a_lo, b_hi - b_lo, max_tokens)
    front_a = draws.heads(_TRIM_A, trim_a)
    front_b = draws.heads(_TRIM_B, trim_b)
    a_lo, a_hi = a_lo + front_a, a_hi - (trim_a - front_a)
    b_lo, b_hi = b_lo + front_b, b_hi - (trim_b - front_b)
    # A random B stays second (ALBERT's one-sentence SOP chunks under the reference rules).
    swapped = (label == 1) & (mode in ("sop", "sso")) & (other < 0)
    return PairSpans(
        doc=doc,
        step=np.full(len(doc), step, dtype=np.int64),
        first_lo=np.where(swapped, b_lo, a_lo),
        first_hi=np.where(swapped, b_hi, a_hi),
        second_lo=np.where(swapped, a_lo, b_lo),
        second_hi=np.where(swapped, a_hi, b_hi),
        label=label,
        random_doc=other,
    )


def _count(
    spans: PairSpans,
    before: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    counts: PairCounts,
) -> None:
    """Placed and truncated tokens, the document's own and other documents' (`before`: A
    and B before truncation)."""
    a_lo, a_hi, b_lo, b_hi = before
    placed = (spans.first_hi - spans.first_lo) + (spans.second_hi - spans.second_lo)
    cut = (a_hi - a_lo) + (b_hi - b_lo) - placed
    own = spans.random_doc < 0
    # a random B is never swapped: it is the stored second segment
    b_placed = np.where(own, 0, spans.second_hi - spans.second_lo)
    b_cut = np.where(own, 0, (b_hi - b_lo) - b_placed)
    counts.sequences += len(spans)
    counts.truncated_sequences += int((cut > 0).sum())
    counts.own_tokens += int((placed - b_placed).sum())
    counts.own_tokens_truncated += int((cut - b_cut).sum())
    counts.random_tokens += int(b_placed.sum())
    counts.random_tokens_truncated += int(b_cut.sum())
