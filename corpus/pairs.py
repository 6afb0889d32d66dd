"""Sentence-pair instances: BERT's NSP, ALBERT's SOP and StructBERT's SSO.

The algorithm is BERT's `create_instances_from_document` (google-research/bert,
create_pretraining_data.py), read sentence by sentence:

- a target length is drawn for each chunk: the maximum (`max_seq_len - 3` content tokens),
  or with probability `short_seq_prob` (0.1) a uniform length in 2..maximum;
- sentences are gathered until the chunk reaches the target or the document ends;
  segment A is a random number of leading sentences of the chunk, B the rest;
- `nsp`: with p=0.5 B is replaced by sentences from another document, starting at a random
  sentence and running until B fills the target; the chunk's sentences that B did not use
  are put back and start the next chunk. `sop`: with p=0.5 A and B are swapped. `sso`:
  next / swapped / random, 1/3 each;
- the pair is cut to fit by removing tokens from the longer side, from the front or the
  back at random, and counted.

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
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from corpus.instances import Specials

PAIR_MODES = ("nsp", "sop", "sso")
# How many classes each mode's label has (see docs/design.md for their meaning).
NUM_LABELS = {"nsp": 2, "sop": 2, "sso": 3}
SHORT_SEQ_PROB = 0.1  # BERT's default
_TYPE_IDS = np.int64


@dataclass(frozen=True)
class Pair:
    """Segments in the order they are stored, the label, and where B came from."""

    first: np.ndarray
    second: np.ndarray
    label: int
    random_doc: int | None = None  # index of the document a random B was taken from


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


def max_content_tokens(max_seq_len: int) -> int:
    """Tokens of A and B together: the length minus [CLS], [SEP], [SEP]."""
    if max_seq_len < 8:
        raise ValueError(f"max_seq_len must be at least 8, got {max_seq_len}")
    return max_seq_len - 3


def _cut_long(sentences: Sequence[np.ndarray], limit: int, counts: PairCounts) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for s in sentences:
        if len(s) <= limit:
            out.append(s)
            continue
        counts.cut_sentences += 1
        out.extend(s[i : i + limit] for i in range(0, len(s), limit))
    return out


def _draw_label(mode: str, rng: random.Random) -> int:
    if mode == "sso":
        return rng.randrange(3)
    return 1 if rng.random() < 0.5 else 0


def _is_random(mode: str, label: int) -> bool:
    return (mode == "nsp" and label == 1) or (mode == "sso" and label == 2)


def _is_swapped(mode: str, label: int) -> bool:
    return mode in ("sop", "sso") and label == 1


def _random_label(mode: str) -> int:
    return 2 if mode == "sso" else 1


def make_pairs(
    docs: Sequence[Sequence[np.ndarray]],
    index: int,
    mode: str,
    max_seq_len: int,
    rng: random.Random,
    counts: PairCounts,
    short_seq_prob: float = SHORT_SEQ_PROB,
) -> list[Pair]:
    """The pairs of document `docs[index]` (a list of sentences as id arrays).

    `docs` are the documents a random B may come from; `rng` alone decides every random
    choice, so the same inputs and rng state give the same pairs. ValueError if a random B
    is needed and `docs` holds no other document with a sentence.
    """
    if mode not in PAIR_MODES:
        raise ValueError(f"unknown pair mode {mode!r}")
    max_tokens = max_content_tokens(max_seq_len)
    document = _cut_long(docs[index], max_tokens, counts)
    pairs: list[Pair] = []
    target = _target(max_tokens, short_seq_prob, rng)
    chunk: list[np.ndarray] = []
    length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            label = _draw_label(mode, rng)
            if len(chunk) == 1 and not _is_random(mode, label):
                only = chunk[0]
                if len(only) >= 2:
                    cut = rng.randint(1, len(only) - 1)
                    chunk = [only[:cut], only[cut:]]
                    counts.split_sentences += 1
                elif mode == "sop":
                    counts.dropped_tokens += len(only)
                    chunk, length, i = [], 0, i + 1
                    target = _target(max_tokens, short_seq_prob, rng)
                    continue
                else:
                    label = _random_label(mode)
                    counts.forced_random += 1
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = np.concatenate(chunk[:a_end])
            random_doc = None
            if _is_random(mode, label):
                random_doc = _other_document(docs, index, rng)
                tokens_b = _random_segment(docs[random_doc], target - len(tokens_a), rng)
                i -= len(chunk) - a_end  # put back the sentences B did not use
            else:
                tokens_b = np.concatenate(chunk[a_end:])
            pairs.append(
                _finish(tokens_a, tokens_b, label, random_doc, mode, max_tokens, rng, counts)
            )
            chunk, length = [], 0
            target = _target(max_tokens, short_seq_prob, rng)
        i += 1
    return pairs


def _target(max_tokens: int, short_seq_prob: float, rng: random.Random) -> int:
    # Mostly fill the sequence; sometimes go short, so that pretraining also sees the short
    # inputs fine-tuning will (BERT's reasoning).
    if rng.random() < short_seq_prob:
        return rng.randint(2, max_tokens)
    return max_tokens


def _other_document(docs: Sequence[Sequence[np.ndarray]], index: int, rng: random.Random) -> int:
    candidates = len(docs) - 1
    if candidates < 1:
        raise ValueError("a random next segment needs a second document, and there is none")
    j = rng.randrange(candidates)
    j = j + 1 if j >= index else j  # uniform over every document but this one
    if not docs[j]:
        raise ValueError(f"document {j} has no sentence to draw a random segment from")
    return j


def _random_segment(doc: Sequence[np.ndarray], target: int, rng: random.Random) -> np.ndarray:
    start = rng.randrange(len(doc))
    taken: list[np.ndarray] = []
    size = 0
    for sentence in doc[start:]:
        taken.append(sentence)
        size += len(sentence)
        if size >= target:
            break
    return np.concatenate(taken)


def _finish(
    a: np.ndarray,
    b: np.ndarray,
    label: int,
    random_doc: int | None,
    mode: str,
    max_tokens: int,
    rng: random.Random,
    counts: PairCounts,
) -> Pair:
    a_lo, a_hi, b_lo, b_hi = 0, len(a), 0, len(b)
    while (a_hi - a_lo) + (b_hi - b_lo) > max_tokens:
        # Trim the longer side (A on a tie, as BERT), from the front or the back at random.
        if a_hi - a_lo >= b_hi - b_lo:
            if rng.random() < 0.5:
                a_lo += 1
            else:
                a_hi -= 1
        elif rng.random() < 0.5:
            b_lo += 1
        else:
            b_hi -= 1
    cut_a = len(a) - (a_hi - a_lo)
    cut_b = len(b) - (b_hi - b_lo)
    a, b = a[a_lo:a_hi], b[b_lo:b_hi]
    counts.sequences += 1
    counts.truncated_sequences += int(cut_a + cut_b > 0)
    counts.own_tokens += len(a)
    counts.own_tokens_truncated += cut_a
    if random_doc is None:
        counts.own_tokens += len(b)
        counts.own_tokens_truncated += cut_b
    else:
        counts.random_tokens += len(b)
        counts.random_tokens_truncated += cut_b
    if _is_swapped(mode, label):
        a, b = b, a
    return Pair(first=a, second=b, label=label, random_doc=random_doc)


def pair_sequence(pair: Pair, specials: Specials) -> tuple[np.ndarray, int]:
    """(`[CLS] first [SEP] second [SEP]`, length of the first segment with [CLS] and [SEP])."""
    cls = np.array([specials.cls], dtype=_TYPE_IDS)
    sep = np.array([specials.sep], dtype=_TYPE_IDS)
    tokens = np.concatenate(
        [cls, pair.first.astype(_TYPE_IDS), sep, pair.second.astype(_TYPE_IDS), sep]
    )
    return tokens, len(pair.first) + 2
