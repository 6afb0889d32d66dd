"""Documents and a tokenizer in, WebDataset shards out (`cloze shard`), and read back.

In: documents. `tokenize` splits and encodes them into sentence ids (`ranges` does the
flat-array arithmetic); `instances` packs sequences (full-sentences, doc-sentences, single)
and `pairs` builds NSP / SOP / SSO pairs; `keys` derives every random choice from a
document's key; `masking` is the one MLM masking definition (static and dynamic),
`premask` applies it to stored copies; `dealing` assigns sequences to shards. `blocks`
encodes blocks of sequences as npy members of tar files and writes the manifest; `reader`,
`npy` and `readahead` stream validated blocks back. Out: `shards/` (tars, `.manifest.json`,
`tokenizer/`), and blocks for the trainer and `inspect`.
"""
