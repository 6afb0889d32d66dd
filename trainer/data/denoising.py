"""BART's noise (`bart` objective; Lewis et al. 2020, section 2.2), made from a collated
batch of document-ordered rows, as fairseq's `DenoisingDataset.__getitem__` makes it.

In order, on a row `[CLS] ... [SEP]` (BART's `<s> ... </s>`):

- sentence permutation: the row's sentences (each ending after a full stop `.`, the last
  one at the row's end) in a random order, `permute_sentences` of them moved;
- text infilling: `mask_ratio` of the row's words chosen as span starts, span lengths in
  words from Poisson(`poisson_lambda`) truncated where its mass falls below 1e-7 and cut
  to the budget; each span becomes one `[MASK]` (or, with probability `random_ratio`, one
  random token), a zero-length span inserts one `[MASK]`;
- insertion noise (`insert_ratio`, off in the paper) and document rotation (`rotate_ratio`,
  off by default).

The decoder regenerates the row as it was: `labels` is the original row. Every quirk of
the reference is kept (spans may overlap and then merge, an insertion of n masks always
makes ceil(n x random_ratio) of them random, the budget is words, not tokens), but one:
fairseq draws a random token from ids 1 to V - 1, which includes its `<pad>`, `</s>` and
`<unk>`; here it comes from the vocabulary's non-special ids (what the MLM masker draws).
tests/trainer/data/test_denoising.py holds the reference's code and compares the two.

Random choices come from a numpy generator seeded by the loader's (seed, epoch, sequence)
key and this module's stream, so a row's noise does not depend on its batch, worker or
device, and a resumed run makes the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from clozeworks.corpus.shards.masking import IGNORE_INDEX, MaskTables

_STREAM = 113  # this module's (targets.py has 110, 111; permutation.py 112)
# Per-row counts the `bart` objective reports: tokens in, tokens out, mask tokens out.
DENOISE_STATS = "denoise_stats"
# The original rows shifted right behind `</s>`: what the decoder reads.
DECODER_INPUTS = "decoder_input_ids"
PAD_MULTIPLE = 8


@dataclass(frozen=True)
class DenoisingSettings:
    """BART's noise; the defaults are the paper's best (text infilling and sentence
    permutation, table 1 and section 4.1) with fairseq's `denoising` task's values."""

    mask_ratio: float = 0.3
    random_ratio: float = 0.1
    insert_ratio: float = 0.0
    rotate_ratio: float = 0.0
    permute_sentences: float = 1.0
    poisson_lambda: float = 3.0


def span_distribution(rate: float) -> np.ndarray:
    """P(k) of Poisson(rate) for k = 0, 1, ... until a term falls below 1e-7 (that term
    included), as fairseq builds its `Categorical`; normalized."""
    ps: list[float] = []
    power, factorial, scale = 1.0, 1, math.exp(-rate)
    for k in range(128):
        ps.append(scale * power / factorial)
        power *= rate
        factorial *= k + 1
        if ps[-1] < 1e-7:
            break
    p = np.array(ps, dtype=np.float64)
    return p / p.sum()


@dataclass
class RowNoise:
    """The noise of one row of ids (int64, `[CLS]` first and `[SEP]` last)."""

    settings: DenoisingSettings
    tables: MaskTables
    full_stop: int | None  # the id of "." (None: the row is one sentence)
    rng: np.random.Generator

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        s = self.settings
        source = tokens.copy()
        if s.permute_sentences > 0:
            source = self.permute_sentences(source, s.permute_sentences)
        if s.mask_ratio > 0:
            source = self.whole_word_mask(source, s.mask_ratio)
        if s.insert_ratio > 0:
            source = self.insert(source, s.insert_ratio)
        if s.rotate_ratio > 0 and self.rng.random() < s.rotate_ratio:
            source = self.rotate(source)
        return source

    def _random_ids(self, n: int) -> np.ndarray:
        pool = self.tables.random_pool.numpy()
        return pool[self.rng.integers(0, len(pool), size=n)]

    def permute_sentences(self, source: np.ndarray, p: float) -> np.ndarray:
        full_stops = source == self.full_stop if self.full_stop is not None else source < 0
        full_stops[-2] = True  # the last sentence ends at the row's end
        ends = np.flatnonzero(full_stops[1:] & ~full_stops[:-1]) + 2
        count = len(ends)
        moved = math.ceil((count * 2 * p) / 2.0)
        substitutions = self.rng.permutation(count)[:moved]
        ordering = np.arange(count)
        ordering[substitutions] = substitutions[self.rng.permutation(moved)]
        result = source.copy()
        at = 1
        for i in ordering:
            sentence = source[(ends[i - 1] if i > 0 else 1) : ends[i]]
            result[at : at + len(sentence)] = sentence
            at += len(sentence)
        return result

    def whole_word_mask(self, source: np.ndarray, p: float) -> np.ndarray:
        word_start = self.tables.word_start.numpy()[source].astype(np.int64)
        word_start[0] = word_start[-1] = 0
        budget = math.ceil(word_start.sum() * p)
        if budget == 0:
            return source
        probs = span_distribution(self.settings.poisson_lambda)
        lengths = self.rng.choice(len(probs), size=budget, p=probs)
        while lengths.sum() < budget:
            more = self.rng.choice(len(probs), size=budget, p=probs)
            lengths = np.concatenate([lengths, more])
        cum = np.cumsum(lengths)
        i = int(np.searchsorted(cum, budget))  # the first span that reaches the budget
        lengths[i] = budget - (0 if i == 0 else cum[i - 1])
        lengths = lengths[: i + 1]
        spans = lengths[lengths > 0]
        inserts = (i + 1) - len(spans)
        if len(spans) == 0:
            return self.insert(source, inserts / len(source))
        starts = np.flatnonzero(word_start)
        indices = starts[self.rng.permutation(len(starts))[: len(spans)]]
        replaced = self.rng.random(len(spans)) < self.settings.random_ratio
        keep = np.ones(len(source), dtype=bool)
        word_start[-1] = 255  # a long word: no span runs past the row's end
        source[indices] = self.tables.mask_id
        source[indices[replaced]] = self._random_ids(int(replaced.sum()))
        left = spans - 1
        while len(indices):
            left = left - word_start[indices + 1]
            going = left >= 0
            indices, left = indices[going] + 1, left[going]
            keep[indices] = False  # the rest of a span is dropped: one mask stands for it
        source = source[keep]
        if inserts > 0:
            source = self.insert(source, inserts / len(source))
        return source

    def insert(self, tokens: np.ndarray, p: float) -> np.ndarray:
        if p == 0.0:
            return tokens
        length = len(tokens)
        n = math.ceil(length * p)
        at = self.rng.permutation(length + n - 2)[:n] + 1
        noise = np.zeros(length + n, dtype=bool)
        noise[at] = True
        result = np.full(length + n, -1, dtype=np.int64)
        randoms = math.ceil(n * self.settings.random_ratio)
        result[at[randoms:]] = self.tables.mask_id
        result[at[:randoms]] = self._random_ids(randoms)
        result[~noise] = tokens
        return result

    def rotate(self, tokens: np.ndarray) -> np.ndarray:
        offset = int(self.rng.integers(1, max(1, len(tokens) - 1) + 1))
        return np.concatenate([tokens[:1], tokens[offset:-1], tokens[1:offset], tokens[-1:]])


def shift_right(ids: torch.Tensor, real: torch.Tensor, start: int, pad: int) -> torch.Tensor:
    """Rows of `ids` [B, L] shifted right behind `start`, pad where `real` is not: what the
    decoder reads (fairseq's `prev_output_tokens`, transformers' `shift_tokens_right`)."""
    shifted = torch.full_like(ids, pad)
    shifted[:, 0] = start
    shifted[:, 1:] = ids[:, :-1].masked_fill(~real[:, :-1], pad)
    return shifted


@dataclass
class Denoising:
    """BART's inputs and targets for a collated batch of rows, in place: `input_ids` and
    `attention_mask` become the noised rows, `labels` the original rows (-100 at padding),
    `decoder_input_ids` the original rows shifted right behind `eos` (fairseq's
    `prev_output_tokens`), `denoise_stats` [B, 3] each row's tokens, noised tokens and
    `[MASK]`s."""

    tables: MaskTables
    full_stop: int | None
    pad: int
    eos: int
    settings: DenoisingSettings = DenoisingSettings()

    def noise(self, tokens: np.ndarray, key: int) -> np.ndarray:
        rng = np.random.default_rng([int(key), _STREAM])
        return RowNoise(self.settings, self.tables, self.full_stop, rng)(tokens)

    def __call__(self, batch: dict[str, torch.Tensor], keys: torch.Tensor) -> None:
        ids = batch["input_ids"]
        lengths = batch["attention_mask"].sum(1).tolist()
        rows = ids.cpu().numpy().astype(np.int64)
        noised = [
            self.noise(row[:n], key)
            for row, n, key in zip(rows, lengths, keys.tolist(), strict=True)
        ]
        longest = max((len(x) for x in noised), default=1)
        width = -(-longest // PAD_MULTIPLE) * PAD_MULTIPLE
        out = np.full((len(noised), width), self.pad, dtype=np.int64)
        for row, x in zip(out, noised, strict=True):
            row[: len(x)] = x
        inputs = torch.from_numpy(out).to(ids.device)
        counts = torch.tensor([len(x) for x in noised], device=ids.device)
        real = torch.arange(width, device=ids.device) < counts[:, None]
        original = batch["attention_mask"].bool()
        batch["labels"] = ids.masked_fill(~original, IGNORE_INDEX)
        batch[DECODER_INPUTS] = shift_right(ids, original, self.eos, self.pad)
        batch["input_ids"] = inputs
        batch["attention_mask"] = real.long()
        masks = ((inputs == self.tables.mask_id) & real).sum(1)
        batch[DENOISE_STATS] = torch.stack(
            [torch.tensor(lengths, device=ids.device), counts, masks], 1
        )
        batch.pop("token_type_ids", None)
