"""`cloze inspect SHARDS --reencode N`: does the encoder this machine would choose give
`tokenizers`' ids on each shard's text?

A shard holds ids, not text, so the text is the shard's own decoded: the first N
sequences of every shard, cut at their special tokens into runs of ordinary ids, each run
decoded with the shard set's tokenizer copy. Each text is encoded by the encoder
`cloze shard` chooses here (corpus/vocab/fast.py, guarded) and by `tokenizers`
(`encode_batch`, no special tokens); a text whose ids differ is a problem. The manifest's
`stats` says which encoders made the set (`shard.encoded_by.*`); where this machine's
differ from those, that is said as a warning, since then the check is of another encoder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from clozeworks.corpus.inspect.shards import built_with, decoding_tokenizer
from clozeworks.corpus.shards.blocks import ShardFormatError, iter_blocks
from clozeworks.corpus.vocab.fast import fast_encoder, flat_ids
from clozeworks.corpus.vocab.proven import same_each
from clozeworks.corpus.vocab.train import TokenizerInfo
from clozeworks.schemas.manifest import Manifest, read_manifest

MAX_EXAMPLES = 5


def shard_texts(
    directory: Path, manifest: Manifest, info: TokenizerInfo, per_shard: int
) -> list[str]:
    """The first `per_shard` sequences of every shard, decoded run by run between special
    tokens with `info`. A damaged shard gives what read before the damage (the summary
    names it)."""
    special = np.array(sorted(set(info.all_special_ids) | set(manifest.special_tokens.values())))
    decode = info.tokenizer.decode
    texts: list[str] = []
    for shard in manifest.shards:
        taken = 0
        try:
            for _, block in iter_blocks(directory / shard.name):
                for i in range(min(len(block), per_shard - taken)):
                    ids = block.sequence(i)
                    cut = np.flatnonzero(np.isin(ids, special))
                    for run in np.split(ids, cut):
                        run = run[~np.isin(run, special)]
                        if len(run):
                            texts.append(decode(run.tolist(), skip_special_tokens=True))
                    taken += 1
                if taken >= per_shard:
                    break
        except ShardFormatError:
            continue
    return texts


def reencode(directory: Path, per_shard: int) -> dict[str, Any]:
    """{"texts", "differ", "encoder", "encoded_here", "built_with", "examples",
    "warnings", "problems"} for the first `per_shard` sequences of every shard
    (`examples`: a few texts whose ids differ; `problems` as `shard_summary` lists them)."""
    manifest = read_manifest(directory)
    info = decoding_tokenizer(directory)
    texts = shard_texts(directory, manifest, info, per_shard)
    tok = info.tokenizer
    tok.no_truncation()
    tok.no_padding()
    way, encode = fast_encoder(tok)
    got = encode(texts)
    want = flat_ids([e.ids for e in tok.encode_batch(texts, add_special_tokens=False)])
    differ = [t for t, same in zip(texts, same_each(got, want), strict=True) if not same]
    built = built_with(manifest)
    here = sorted(label for label, n in encode.counts.items() if n)
    warnings = []
    if built and not set(here) <= set(built):
        warnings.append(
            f"the set was encoded by {', '.join(sorted(built))}; this machine's encoder is "
            f"{', '.join(here) or way}, so --reencode checked that one"
        )
    problems = []
    if differ:
        problem = f"{len(differ)} of {len(texts)} decoded texts get other ids"
        problems.append({"shard": "*", "problem": problem})
    return {
        "texts": len(texts),
        "differ": len(differ),
        "encoder": way,
        "encoded_here": dict(encode.counts),
        "built_with": built,
        "examples": [t[:200] for t in differ[:MAX_EXAMPLES]],
        "warnings": warnings,
        "problems": problems,
    }
