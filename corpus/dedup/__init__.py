"""Documents in, duplicates named (`cloze dedup`).

In: documents (id, text). `exact` says what counts as the same text and which copy is
kept (the smallest id), plus line-level dedup; `minhash` turns a text into MinHash
signatures, LSH band keys and true Jaccard; `components` joins duplicate pairs into
clusters (connected components, as reducer steps a Beam pipeline runs). Out: edges and
clusters, each cluster keeping its smallest id.
"""
