"""A sentence longer than a sequence is cut between words: no full-sentences or
doc-sentences sequence begins with a `##` piece (but one of a word longer than a
sequence), and cutting keeps every token in order."""

from __future__ import annotations

import json

import numpy as np
import webdataset as wds
from hypothesis import given
from hypothesis import strategies as st

from clozeworks.corpus.shards.instances import word_cuts
from clozeworks.corpus.vocab.train import load_tokenizer


@given(
    st.lists(st.booleans(), min_size=1, max_size=300),
    st.integers(min_value=1, max_value=40),
)
def test_word_cuts_fit_and_start_words(starts: list[bool], capacity: int) -> None:
    ids = np.arange(len(starts))
    table = np.array(starts, dtype=bool)
    sizes = word_cuts(ids, capacity, table)
    assert sum(sizes) == len(ids) and all(0 < s <= capacity for s in sizes)
    position = 0
    for size in sizes[:-1]:
        nxt = position + size
        # The cut is before a word start, or no word starts in the window past `position`.
        assert table[nxt] or not table[position + 1 : position + capacity + 1].any()
        # And no later word start would still have fit.
        assert not table[nxt + 1 : position + capacity + 1].any()
        position = nxt
    assert word_cuts(ids, capacity, None) == [
        min(capacity, len(ids) - i) for i in range(0, len(ids), capacity)
    ]


def test_no_sequence_of_the_built_shards_begins_inside_a_word(shards_dir, tokenizer_dir) -> None:
    info = load_tokenizer(tokenizer_dir)
    manifest = json.loads((shards_dir / ".manifest.json").read_text())
    assert manifest["mode"] == "full-sentences"
    urls = [str(shards_dir / s["name"]) for s in manifest["shards"]]
    firsts, sequences = [], 0
    for sample in wds.WebDataset(urls, shardshuffle=False).decode():
        tokens, offsets = sample["tokens.npy"], sample["offsets.npy"]
        for i in range(len(offsets) - 1):
            sequences += 1
            firsts.append(info.tokenizer.id_to_token(int(tokens[offsets[i] + 1])))  # after CLS
    continuing = [t for t in firsts if t.startswith("##")]
    assert sequences > 500 and continuing == [], continuing[:10]
    assert manifest["stats"]["shard.sequences"] == sequences  # every sequence was read
