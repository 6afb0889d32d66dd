"""The reference selection loops, line for line, on lists of word-start flags.

`spanbert_reference` is `PairWithSpanMaskingScheme.mask` from facebookresearch/SpanBERT
(pretraining/fairseq/data/masking.py); `albert_reference` the selection loop of
`create_masked_lm_predictions` from google-research/albert (create_pretraining_data.py).
Only numpy: bench/fidelity/masking.py runs them beside any clozeworks install.
"""

import math

import numpy as np

CLS, SEP = 2, 3


def spanbert_reference(block, is_start, rng, ratio=0.15, p=0.2, lower=1, upper=10):
    """PairWithSpanMaskingScheme.mask's selection (the block is the row without [CLS] and
    its final [SEP]; SpanBERT's blocks have no specials, so ours is cut there too)."""
    lens = list(range(lower, upper + 1))
    distrib = [p * (1 - p) ** (i - lower) for i in range(lower, upper + 1)]
    distrib = [x / sum(distrib) for x in distrib]
    word_piece_map = [bool(is_start[t]) for t in block]

    def get_word_start(anchor):
        left = anchor
        while left > 0 and not word_piece_map[left]:
            left -= 1
        return left

    def get_word_end(anchor):
        right = anchor + 1
        while right < len(block) and not word_piece_map[right]:
            right += 1
        return right

    sent_length = len(block)
    mask_num = math.ceil(sent_length * ratio)
    mask = set()
    while len(mask) < mask_num:
        span_len = rng.choice(lens, p=distrib)
        anchor = rng.choice(sent_length)
        if anchor in mask:
            continue
        left1, right1 = get_word_start(anchor), get_word_end(anchor)
        for i in range(left1, right1):
            if len(mask) >= mask_num:
                break
            mask.add(i)
        num_words = 1
        right2 = right1
        while num_words < span_len and right2 < len(block) and len(mask) < mask_num:
            left2 = right2
            right2 = get_word_end(right2)
            num_words += 1
            for i in range(left2, right2):
                if len(mask) >= mask_num:
                    break
                mask.add(i)
    return mask


def candidates(tokens, is_start, specials, whole_word=True):
    """BERT's and ALBERT's `cand_indexes` (the same loop in both): a list of positions per
    word, or per token without whole-word masking; [CLS] and [SEP] are none."""
    cand_indexes = []
    for i, token in enumerate(tokens):
        if token in specials:
            continue
        if whole_word and len(cand_indexes) >= 1 and not is_start[token]:
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])
    return cand_indexes


def run_words(row, masked, is_start):
    """Words in each maximal run of masked positions of a row (what the issue measured:
    touching spans are one run, as SpanBERT's merge_intervals makes them)."""
    out, words = [], 0
    for i, token in enumerate(row):
        if i in masked:
            first = i == 0 or (i - 1) not in masked
            words += 1 if (first or is_start[token]) else 0
        elif words:
            out.append(words)
            words = 0
    if words:
        out.append(words)
    return out


def albert_reference(
    tokens, is_start, rng, prob=0.15, max_predictions=20, max_ngram=3, specials=(CLS, SEP)
):
    """create_masked_lm_predictions' choice of positions (do_whole_word_mask, ngram 3,
    favor_shorter_ngram), without the 80/10/10 that follows it."""
    cand_indexes = candidates(tokens, is_start, specials)
    num_to_predict = min(max_predictions, max(1, int(round(len(tokens) * prob))))  # noqa: RUF046
    ngrams = np.arange(1, max_ngram + 1, dtype=np.int64)
    pvals = 1.0 / np.arange(1, max_ngram + 1)
    pvals /= pvals.sum(keepdims=True)
    ngram_indexes = []
    for idx in range(len(cand_indexes)):
        ngram_indexes.append([cand_indexes[idx : idx + n] for n in ngrams])
    rng.shuffle(ngram_indexes)
    masked = []
    covered = set()
    for cand_index_set in ngram_indexes:
        if len(masked) >= num_to_predict:
            break
        if not cand_index_set:
            continue
        n = rng.choice(
            ngrams[: len(cand_index_set)],
            p=pvals[: len(cand_index_set)] / pvals[: len(cand_index_set)].sum(keepdims=True),
        )
        index_set = sum(cand_index_set[n - 1], [])  # noqa: RUF017
        n -= 1
        while len(masked) + len(index_set) > num_to_predict:
            if n == 0:
                break
            index_set = sum(cand_index_set[n - 1], [])  # noqa: RUF017
            n -= 1
        if len(masked) + len(index_set) > num_to_predict:
            continue
        if any(index in covered for index in index_set):
            continue
        for index in index_set:
            covered.add(index)
            masked.append(index)
    return set(masked)


def bert_reference(
    tokens, is_start, rng, prob=0.15, max_predictions=20, whole_word=True, specials=(CLS, SEP)
):
    """google-research/bert create_masked_lm_predictions' choice of positions
    (do_whole_word_mask as given), without the 80/10/10 that follows it."""
    cand_indexes = candidates(tokens, is_start, specials, whole_word)
    rng.shuffle(cand_indexes)
    num_to_predict = min(max_predictions, max(1, int(round(len(tokens) * prob))))  # noqa: RUF046
    masked = []
    covered = set()
    for index_set in cand_indexes:
        if len(masked) >= num_to_predict:
            break
        if len(masked) + len(index_set) > num_to_predict:
            continue
        if any(index in covered for index in index_set):
            continue
        for index in index_set:
            covered.add(index)
            masked.append(index)
    return set(masked)
