"""Our dynamic masking against transformers' own collator, `DataCollatorForLanguageModeling`
(token masking, and `whole_word_mask=True`), run on the same sequences of real text with the
same WordPiece vocabulary and the same word boundaries.

What agrees: the share of maskable tokens predicted on average, the 80/10/10 split, special
tokens never predicted, whole words masked whole. Where the collator departs from BERT's
`create_pretraining_data.py` (which we follow), the test pins the difference:
- it draws each token with probability 0.15 (a row's count varies, sd ~4 at 126 maskable
  tokens); BERT takes round(0.15 x n) per row, so ours vary only by rounding;
- its random replacement is uniform over the whole vocabulary, special tokens included;
  ours never puts a special token in the text (BERT draws from the vocabulary's words);
- with whole words it draws each word with probability 0.15, so the count per row varies
  again; BERT's loop fills each row's budget with whole words.

Tolerances: 250k maskable tokens, so a share's standard error is below 0.001; the bounds
below are 5 to 10 standard errors wide.
"""

from __future__ import annotations

from itertools import islice

import numpy as np
import pytest
import torch

from clozeworks.corpus.shards.counter_rng import sequence_keys
from clozeworks.corpus.shards.instances import (
    Specials,
    chunk_bounds,
    content_capacity,
    single_sequences,
)
from clozeworks.corpus.shards.masking import MaskTables, mask_tokens
from clozeworks.corpus.shards.tokenize import DocumentEncoder
from clozeworks.corpus.text.demo import iter_docstrings
from clozeworks.corpus.vocab.train import load_tokenizer
from clozeworks.schemas.masking import MaskingSettings

transformers = pytest.importorskip("transformers")
ROWS, LENGTH = 2000, 128


@pytest.fixture(scope="module")
def setup(tokenizer_dir):
    info = load_tokenizer(tokenizer_dir)
    tables = MaskTables.build(
        info.vocab_size, info.all_special_ids, info.word_start_table(), info.special_ids["mask"]
    )
    texts = [d["text"] for d in islice(iter_docstrings(), 3000)]
    batch = DocumentEncoder(info.tokenizer).encode(texts)
    sp = Specials(cls=info.special_ids["cls"], sep=info.special_ids["sep"])
    bounds = chunk_bounds(batch, content_capacity(LENGTH))[: ROWS + 1]
    tokens, offsets = single_sequences(batch.ids.astype(np.int64), bounds[:-1], bounds[1:], sp)
    seqs = [tokens[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
    assert len(seqs) == ROWS
    width = max(len(s) for s in seqs)
    ids = torch.full((ROWS, width), info.special_ids["pad"], dtype=torch.int64)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.from_numpy(s)
    attention = ids != info.special_ids["pad"]
    hf = transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir))
    return info, tables, seqs, ids, attention, hf


def ours(setup, kind: str):
    _info, tables, _, ids, attention, _ = setup
    keys = sequence_keys(3, 0, torch.arange(ROWS))
    r = mask_tokens(ids, attention, keys, tables, MaskingSettings(kind=kind))
    return r.input_ids, r.labels != -100


def theirs(setup, whole_words: bool):
    _info, tables, seqs, ids, _attention, hf = setup
    collator = transformers.DataCollatorForLanguageModeling(
        hf, mlm_probability=0.15, whole_word_mask=whole_words, seed=3
    )
    starts = tables.word_start.numpy()
    features = []
    for s in seqs:
        # Offsets that say what our word-start table says: a continuation piece touches the
        # piece before it, a word start leaves a gap (what the collator reads words from).
        spans, at = [], 0
        for token in s.tolist():
            at += 0 if not starts[token] else 1
            spans.append((at, at + 1))
            at += 1
        feature = {"input_ids": s.tolist()}
        if whole_words:  # padded here: the tokenizer pads input_ids only
            feature["offset_mapping"] = spans + [(0, 0)] * (ids.shape[1] - len(spans))
        features.append(feature)
    out = collator(features)
    width = ids.shape[1]
    return out["input_ids"][:, :width], (out["labels"] != -100)[:, :width]


def maskable(setup) -> torch.Tensor:
    _, tables, _, ids, attention, _ = setup
    return attention & ~tables.special[ids]


def actions(setup, masked_ids, predicted):
    _, tables, _, ids, _, _ = setup
    mask_id = tables.mask_id
    chosen = ids[predicted]
    after = masked_ids[predicted]
    as_mask = (after == mask_id).float().mean().item()
    kept = (after == chosen).float().mean().item()
    return as_mask, 1.0 - as_mask - kept, kept


def test_token_masking_agrees_with_the_collator_where_bert_does(setup) -> None:
    _, tables, _, ids, _attention, _ = setup
    can = maskable(setup)
    ours_ids, ours_pred = ours(setup, "token")
    hf_ids, hf_pred = theirs(setup, whole_words=False)
    for predicted in (ours_pred, hf_pred):
        assert not bool((predicted & ~can).any())  # specials and padding never predicted
        share = predicted.sum().item() / can.sum().item()
        assert abs(share - 0.15) <= 0.005, share
    for masked_ids, predicted in ((ours_ids, ours_pred), (hf_ids, hf_pred)):
        as_mask, random, kept = actions(setup, masked_ids, predicted)
        assert abs(as_mask - 0.8) <= 0.01 and abs(random - 0.1) <= 0.01, (as_mask, random)
        assert abs(kept - 0.1) <= 0.01, kept

    # The collator's count per row is binomial; ours is BERT's round(0.15 x n).
    n = can.sum(1).double()
    expected = torch.round(0.15 * n)
    ours_dev = (ours_pred.sum(1).double() - expected).abs().max().item()
    hf_sd = (hf_pred.sum(1).double() - 0.15 * n).std().item()
    binomial_sd = (n * 0.15 * 0.85).sqrt().mean().item()
    assert ours_dev <= 1.0
    assert abs(hf_sd / binomial_sd - 1.0) <= 0.1, (hf_sd, binomial_sd)

    # The collator's random replacements may be special tokens; ours never are.
    def special_share(masked_ids, predicted):
        changed = predicted & (masked_ids != ids) & (masked_ids != tables.mask_id)
        return tables.special[masked_ids[changed]].float().mean().item()

    assert special_share(ours_ids, ours_pred) == 0.0
    vocab_share = tables.special.float().mean().item()
    hf_special = special_share(hf_ids, hf_pred)
    assert hf_special > 0.0 or vocab_share < 1e-3
    assert abs(hf_special - vocab_share) <= max(0.01, 3 * vocab_share)


def test_whole_word_masking_against_the_collator(setup) -> None:
    _, tables, _, ids, _attention, _ = setup
    can = maskable(setup)
    word = torch.cumsum((tables.word_start[ids] | ~can).long(), 1)  # word number per token

    def partial_words(predicted) -> int:
        slots = torch.zeros(word.shape[0], word.shape[1] + 1, dtype=torch.int64)
        size = slots.clone().scatter_add_(1, word, can.long())
        hit = slots.clone().scatter_add_(1, word, predicted.long())
        return int(((hit > 0) & (hit < size)).sum())

    _ours_ids, ours_pred = ours(setup, "wwm")
    _hf_ids, hf_pred = theirs(setup, whole_words=True)
    assert partial_words(ours_pred) == 0 and partial_words(hf_pred) == 0
    assert not bool((ours_pred & ~can).any()) and not bool((hf_pred & ~can).any())
    ours_share = ours_pred.sum().item() / can.sum().item()
    hf_share = hf_pred.sum().item() / can.sum().item()
    # The collator draws each word with probability 0.15 (at its first piece) and widens
    # it: the share is 0.15 on average, the count per row varies with the words drawn.
    assert abs(ours_share - 0.15) <= 0.005, ours_share
    assert abs(hf_share - 0.15) <= 0.005, hf_share
    n = can.sum(1).double()
    ours_dev = (ours_pred.sum(1).double() - 0.15 * n).abs()
    hf_dev = (hf_pred.sum(1).double() - 0.15 * n).abs()
    # Ours: BERT's loop skips a word that would cross the budget and takes later ones, so a
    # row ends at its budget unless no remaining word fits.
    assert ours_dev.mean().item() <= 1.0 < hf_dev.mean().item()
