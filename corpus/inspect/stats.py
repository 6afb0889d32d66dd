"""Streaming statistics over shard blocks and other stage outputs.

Everything here is exact and vectorised with numpy: a block's sequence lengths, token ids,
pair labels and masked positions are counted with `np.bincount`, never a Python loop over
tokens. Accumulators hold counts, not data, so their memory is bounded by the vocabulary
size and the longest sequence, whatever the number of shards; two accumulators `merge`.

Quantiles are the *inverted CDF* ones (`numpy.percentile(..., method="inverted_cdf")`):
p50 is the smallest value with at least half of the observations at or below it, so every
reported quantile is a length that actually occurs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clozeworks.corpus.shards.blocks import Block

# Lengths below this are counted in a dense array; larger ones (long documents) in a dict.
DENSE_LIMIT = 1 << 16
# Points on the rank-frequency curve kept in a summary (log-spaced ranks).
RANK_POINTS = 200


class Histogram:
    """Exact counts of non-negative integers (lengths), mergeable and cheap to update."""

    def __init__(self, dense_limit: int = DENSE_LIMIT) -> None:
        self.dense_limit = dense_limit
        self.dense = np.zeros(0, dtype=np.int64)
        self.sparse: dict[int, int] = {}

    def add(self, values: np.ndarray) -> None:
        """Count every value of a 1-d integer array (ValueError on a negative value)."""
        if values.size == 0:
            return
        if int(values.min()) < 0:
            raise ValueError("histogram values must be >= 0")
        big = values >= self.dense_limit
        if big.any():
            keys, counts = np.unique(values[big], return_counts=True)
            for k, c in zip(keys.tolist(), counts.tolist(), strict=True):
                self.sparse[k] = self.sparse.get(k, 0) + c
            values = values[~big]
        self._add_dense(np.bincount(values))

    def _add_dense(self, counts: np.ndarray) -> None:
        if len(counts) > len(self.dense):
            counts = counts.astype(np.int64, copy=True)
            counts[: len(self.dense)] += self.dense
            self.dense = counts
        else:
            self.dense[: len(counts)] += counts

    def merge(self, other: Histogram) -> None:
        self._add_dense(other.dense)
        for k, c in other.sparse.items():
            self.sparse[k] = self.sparse.get(k, 0) + c

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """(values, counts), ascending, only values that occur."""
        keys = np.flatnonzero(self.dense)
        weights = self.dense[keys]
        if self.sparse:
            extra = sorted(self.sparse)
            keys = np.concatenate([keys, np.array(extra, dtype=np.int64)])
            weights = np.concatenate([weights, [self.sparse[k] for k in extra]])
        return keys.astype(np.int64), weights.astype(np.int64)

    @property
    def count(self) -> int:
        return int(self.dense.sum()) + sum(self.sparse.values())

    @property
    def total(self) -> int:
        """Sum of all values counted (total tokens for a length histogram)."""
        keys, weights = self.items()
        return int((keys * weights).sum())

    def summary(self, histogram: bool = False) -> dict[str, Any]:
        """count, min, mean, p50, p95, max (and with `histogram` [[value, count], ...])."""
        keys, weights = self.items()
        if len(keys) == 0:
            out: dict[str, Any] = {"count": 0, "min": None, "mean": None, "p50": None}
            out.update(p95=None, max=None)
            return {**out, "histogram": []} if histogram else out
        total = int(weights.sum())
        cum = np.cumsum(weights)
        out = {
            "count": total,
            "min": int(keys[0]),
            "mean": float((keys * weights).sum() / total),
            "p50": quantile(keys, cum, 0.5),
            "p95": quantile(keys, cum, 0.95),
            "max": int(keys[-1]),
        }
        if histogram:
            out["histogram"] = np.stack([keys, weights], axis=1).tolist()
        return out

    def binned(self, edges: np.ndarray) -> list[int]:
        """Counts in [edges[i], edges[i+1]) for each i; the last bin also takes the rest."""
        keys, weights = self.items()
        where = np.clip(np.searchsorted(edges, keys, side="right") - 1, 0, len(edges) - 2)
        return (
            np.bincount(where, weights=weights, minlength=len(edges) - 1).astype(np.int64).tolist()
        )


def log2_edges(largest: int) -> np.ndarray:
    """0, 1, 2, 4, ... up to past `largest`: bins for lengths spanning orders of magnitude."""
    top = max(1, int(largest)).bit_length()
    return np.concatenate([[0], 2 ** np.arange(top + 1)]).astype(np.int64)


def quantile(keys: np.ndarray, cum: np.ndarray, q: float) -> int:
    """Smallest key whose cumulative count reaches q of the total (inverted CDF)."""
    target = q * cum[-1]
    return int(keys[min(int(np.searchsorted(cum, target, side="left")), len(keys) - 1)])


def padding_waste(lengths: Histogram, batch_size: int, max_len: int) -> dict[str, Any]:
    """Share of the token slots of a padded batch that are padding, three ways:

    - `static`: every sequence padded to `max_len` (original BERT);
    - `dynamic`: batches of `batch_size` sequences drawn at random (shards are shuffled, so
      stream order is random), each padded to its longest sequence. This is the expectation
      over random full batches: E[batch max] = sum_L L * (F(L)^B - F(L-1)^B);
    - `bucketed`: sequences sorted by length before batching, the best any length
      bucketing can do (a loader bucketing within a shuffle buffer lands in between).
    """
    keys, weights = lengths.items()
    if len(keys) == 0 or batch_size < 1:
        return {"batch_size": batch_size, "static": None, "dynamic": None, "bucketed": None}
    n = int(weights.sum())
    real = float((keys * weights).sum())
    mean = real / n
    cdf = np.cumsum(weights) / n
    below = np.concatenate([[0.0], cdf[:-1]])
    expected_max = float((keys * (cdf**batch_size - below**batch_size)).sum())
    # Sorted order: batch k holds sorted positions [kB, min((k+1)B, n)); its longest
    # sequence is the one at its last position.
    ends = np.minimum(np.arange(1, -(-n // batch_size) + 1, dtype=np.int64) * batch_size, n)
    sizes = np.diff(np.concatenate([[0], ends]))
    batch_max = keys[np.searchsorted(np.cumsum(weights), ends - 1, side="right")]
    bucketed_slots = float((batch_max * sizes).sum())
    return {
        "batch_size": batch_size,
        "static": _share(max(max_len, int(keys[-1])) * n - real, max(max_len, int(keys[-1])) * n),
        "dynamic": 1.0 - mean / expected_max if expected_max > 0 else 0.0,
        "bucketed": _share(bucketed_slots - real, bucketed_slots),
    }


def _share(part: float, whole: float) -> float:
    return float(part / whole) if whole else 0.0


class TokenCounts:
    """How often each id of a vocabulary occurs. Ids at or above `vocab_size` are counted
    apart (`out_of_vocab`): they mean the shard was encoded with another vocabulary."""

    # Token ids are buffered and counted together, so the vocabulary-sized add is paid
    # once per this many tokens rather than once per block (8 MB of intp at most).
    FLUSH_TOKENS = 1 << 20

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self.counts = np.zeros(vocab_size, dtype=np.int64)
        self.out_of_vocab = 0
        self._pending: list[np.ndarray] = []
        self._pending_size = 0

    def add(self, ids: np.ndarray) -> None:
        self._pending.append(ids)
        self._pending_size += ids.size
        if self._pending_size >= max(self.FLUSH_TOKENS, self.vocab_size):
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        # bincount casts to intp anyway; casting while concatenating is one pass, and
        # bincount over intp is about 3x faster than over uint16.
        ids = np.concatenate(self._pending, dtype=np.intp, casting="unsafe")
        self._pending, self._pending_size = [], 0
        counts = np.bincount(ids, minlength=self.vocab_size)
        self.out_of_vocab += int(counts[self.vocab_size :].sum())
        self.counts += counts[: self.vocab_size]

    def merge(self, other: TokenCounts) -> None:
        self.flush()
        other.flush()
        self.counts += other.counts
        self.out_of_vocab += other.out_of_vocab

    def summary(
        self, special_ids: dict[str, int], unk_id: int, id_to_token: Any, top_k: int
    ) -> dict[str, Any]:
        """Top-k, UNK rate, unused share and special-token counts.

        `special_ids` maps a special token's string to its id. Content tokens are all
        tokens but the specials, except `[UNK]`, which stands for content; the UNK rate is
        UNK / content tokens. The unused share is over the non-special ids.
        """
        self.flush()
        counts = self.counts
        total = int(counts.sum())
        special = np.zeros(self.vocab_size, dtype=bool)
        for idx in special_ids.values():
            if 0 <= idx < self.vocab_size:
                special[idx] = True
        content = total - int(counts[special].sum()) + int(counts[unk_id])
        order = np.argsort(-counts, kind="stable")[:top_k]
        ranked = np.sort(counts[counts > 0])[::-1]
        ordinary = ~special
        never = int((counts[ordinary] == 0).sum())
        return {
            "total": total,
            "content_tokens": content,
            "unk": int(counts[unk_id]),
            "unk_rate": _share(int(counts[unk_id]), content),
            "distinct": int((counts > 0).sum()),
            "never_used": never,
            "never_used_share": _share(never, int(ordinary.sum())),
            "out_of_vocab": self.out_of_vocab,
            "special": {tok: int(counts[idx]) for tok, idx in special_ids.items()},
            "top": [
                {
                    "id": int(i),
                    "token": id_to_token(int(i)),
                    "count": int(counts[i]),
                    "share": _share(int(counts[i]), total),
                }
                for i in order
                if counts[i] > 0
            ],
            "rank_frequency": _rank_points(ranked),
        }


def _rank_points(ranked: np.ndarray) -> list[list[int]]:
    """[[rank (1-based), count], ...] at up to RANK_POINTS log-spaced ranks, ends included."""
    if len(ranked) == 0:
        return []
    ranks = np.unique(np.geomspace(1, len(ranked), num=RANK_POINTS).round().astype(np.int64))
    return np.stack([ranks, ranked[ranks - 1]], axis=1).tolist()


@dataclass
class BlockStats:
    """Everything `cloze inspect` counts about blocks: feed it with `add`, combine with
    `merge`. `problems` lists what is wrong inside blocks that decoded (a masked position
    past its sequence, a segment longer than its sequence, ...)."""

    vocab_size: int
    mask_id: int
    max_len: int
    block_size: int
    token_dtype: str = "uint16"
    pairs: bool = False
    premasked: bool = False
    blocks: int = 0
    sequences: int = 0
    tokens: int = 0
    lengths: Histogram = field(default_factory=Histogram)
    token_counts: TokenCounts = field(init=False)
    labels: np.ndarray = field(default_factory=lambda: np.zeros(3, dtype=np.int64))
    segment_a: Histogram = field(default_factory=Histogram)
    segment_b: Histogram = field(default_factory=Histogram)
    predictions: Histogram = field(default_factory=Histogram)
    # Pre-masked positions by what the input holds there: [MASK], a random id, the original.
    masked: int = 0
    randomized: int = 0
    unchanged: int = 0
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.token_counts = TokenCounts(self.vocab_size)

    def add(self, key: str, block: Block) -> None:
        problem = self._bad_arrays(block)
        if problem:
            self.problems.append(f"block {key}: {problem}")
            return
        n = len(block)
        lengths = np.diff(block.offsets)
        self.blocks += 1
        self.sequences += n
        self.tokens += block.num_tokens
        self.lengths.add(lengths)
        self.token_counts.add(block.tokens)
        if n > self.block_size:
            self.problems.append(f"block {key}: {n} sequences, more than block_size")
        if n and int(lengths.max()) > self.max_len:
            self.problems.append(
                f"block {key}: a sequence of {int(lengths.max())} tokens, "
                f"more than max_seq_len {self.max_len}"
            )
        if self.pairs:
            self._add_pairs(key, block, lengths)
        if self.premasked:
            self._add_premasked(key, block, lengths)

    def _bad_arrays(self, block: Block) -> str | None:
        """What is wrong with the arrays' shapes and types, before anything indexes them."""
        wanted = {"tokens": "=", "offsets": "iu", "segments": "iu", "labels": "iu"}
        wanted.update(mlm_positions="iu", mlm_offsets="iu", mlm_labels="=")
        wanted.update(docs="u", doc_offsets="iu")
        for name, kinds in wanted.items():
            array = getattr(block, name)
            if array is None:
                continue
            if array.ndim != 1:
                return f"{name}.npy has {array.ndim} dimensions, expected 1"
            ok = array.dtype == self.token_dtype if kinds == "=" else array.dtype.kind in kinds
            if not ok:
                expected = self.token_dtype if kinds == "=" else "integers"
                return f"{name}.npy holds {array.dtype}, expected {expected}"
        return None

    def _add_pairs(self, key: str, block: Block, lengths: np.ndarray) -> None:
        if block.segments is None or block.labels is None:
            self.problems.append(f"block {key}: a pair-mode block without segments or labels")
            return
        # segments[i] counts [CLS] A [SEP]; B's share of the rest carries its [SEP].
        seg = block.segments.astype(np.int64)
        if np.any(seg < 2) or np.any(seg > lengths - 1):
            self.problems.append(f"block {key}: a segment length outside its sequence")
            return
        labels = block.labels.astype(np.int64)
        if np.any(labels < 0) or np.any(labels > 2):
            self.problems.append(f"block {key}: a sentence label outside 0..2")
            return
        self.labels += np.bincount(labels, minlength=3)[:3]
        self.segment_a.add(seg - 2)
        self.segment_b.add(lengths - seg - 1)

    def _add_premasked(self, key: str, block: Block, lengths: np.ndarray) -> None:
        if block.mlm_offsets is None or block.mlm_positions is None or block.mlm_labels is None:
            self.problems.append(f"block {key}: a pre-masked block without mlm arrays")
            return
        per_seq = np.diff(block.mlm_offsets)
        if block.mlm_offsets[0] != 0 or (len(per_seq) and per_seq.min() < 0):
            self.problems.append(f"block {key}: mlm_offsets are not non-decreasing from 0")
            return
        self.predictions.add(per_seq)
        if len(block.mlm_positions) == 0:
            return
        # Where each prediction lands in the block's token array, and where its sequence
        # ends: one repeat each instead of a per-prediction sequence index.
        where = np.repeat(block.offsets[:-1], per_seq) + block.mlm_positions
        if block.mlm_positions.min() < 0 or np.any(where >= np.repeat(block.offsets[1:], per_seq)):
            self.problems.append(f"block {key}: a masked position outside its sequence")
            return
        stored = block.tokens[where]
        is_mask = stored == self.mask_id
        masked = int(np.count_nonzero(is_mask))
        same = int(np.count_nonzero((stored == block.mlm_labels) & ~is_mask))
        self.masked += masked
        self.unchanged += same
        self.randomized += len(stored) - masked - same

    def merge(self, other: BlockStats) -> None:
        self.blocks += other.blocks
        self.sequences += other.sequences
        self.tokens += other.tokens
        self.lengths.merge(other.lengths)
        self.token_counts.merge(other.token_counts)
        self.labels += other.labels
        self.segment_a.merge(other.segment_a)
        self.segment_b.merge(other.segment_b)
        self.predictions.merge(other.predictions)
        self.masked += other.masked
        self.randomized += other.randomized
        self.unchanged += other.unchanged
        self.problems.extend(other.problems)

    def pair_summary(self, label_names: tuple[str, ...]) -> dict[str, Any]:
        counts = {name: int(self.labels[i]) for i, name in enumerate(label_names)}
        total = sum(counts.values())
        return {
            "labels": counts,
            "label_share": {name: _share(c, total) for name, c in counts.items()},
            "segment_a": self.segment_a.summary(histogram=True),
            "segment_b": self.segment_b.summary(histogram=True),
        }

    def premask_summary(self, maskable_tokens: int) -> dict[str, Any]:
        predicted = self.masked + self.randomized + self.unchanged
        return {
            "predictions": predicted,
            "maskable_tokens": maskable_tokens,
            "masked_share": _share(predicted, maskable_tokens),
            "counts": {
                "mask": self.masked,
                "random": self.randomized,
                "unchanged": self.unchanged,
            },
            "split": {
                "mask": _share(self.masked, predicted),
                "random": _share(self.randomized, predicted),
                "unchanged": _share(self.unchanged, predicted),
            },
            "predictions_per_sequence": self.predictions.summary(histogram=True),
        }
