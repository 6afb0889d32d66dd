"""The work over text, arrays and files, by stage; usable from a notebook, no Beam.

`text` (raw files -> documents: readers, normalization, filters, sentences), `dedup`
(exact keys, MinHash, connected components), `vocab` (tokenizer training, files, sample,
held-out statistics), `shards` (documents -> sequences -> masked blocks -> tar files, and
back), `inspect` (statistics and reports over any stage's output), and `outputs` (the one
output-filesystem abstraction every stage writes through).
"""
