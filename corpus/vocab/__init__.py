"""Documents in, a tokenizer directory out (`cloze vocab`).

In: a document sample chosen by `sample` (a hash of seed and id decides training or
held-out). `alphabet` counts characters and fixes WordPiece's alphabet so training is
deterministic; `train` trains WordPiece, byte-level BPE or Unigram with `tokenizers`;
`files` writes, loads and copies the Hugging Face tokenizer directory (ours, a user's, or a
plain BERT vocab.txt); `stats` measures the result on held-out text. Out: `tokenizer/`
with `vocab_stats.json`.
"""
