"""Raw text in, clean documents out (`cloze clean`).

In: raw files (jsonl, txt, parquet; plain, .gz, .zst, .bz2, .xz) read by `readers` into
`RawDocument`s, or records it could not read as `Rejected` with a reason. Then `normalize`
(Unicode form, whitespace), `filters` (C4, Gopher, FineWeb, language, length: keep, or drop
with a reason) and `sentences` (sentencex; shared with dedup's line mode and the shard
builder). `demo` writes the built-in demo corpus. Out: document texts and drop reasons.
"""
