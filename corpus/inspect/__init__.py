"""Any stage's output in, what it holds out (`cloze inspect`).

In: a document store, a tokenizer, a shard set (a training run is summarized by
`trainer.runinfo`). `stages` tells what a path holds and summarizes document
stores and tokenizers; `shards` summarizes a shard set block by block (and verifies it);
`stats` holds the streaming histograms and counters they share. Out: summary dicts (the
keys of docs/inspect.md), drawn by `text` for a terminal and `html` as one self-contained
page.
"""
