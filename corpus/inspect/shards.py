"""What is inside a shard set: statistics, integrity and examples (see docs/inspect.md).

Everything streams: each shard is read once, block by block, and its counts are merged
into the totals only when the whole shard read cleanly. With `verify`, the sha256 is
computed from the same bytes the tar reader consumes, so a shard is read from disk once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, cast

from clozeworks.corpus.inspect.languages import token_scripts
from clozeworks.corpus.inspect.stats import BlockStats, padding_waste
from clozeworks.corpus.shards.blocks import Block, ShardFormatError, iter_blocks, iter_blocks_from
from clozeworks.corpus.shards.npy import load_npy_readonly
from clozeworks.corpus.shards.readahead import ReadAhead
from clozeworks.corpus.shards.recipes import ENCODER_COUNTER
from clozeworks.corpus.vocab.train import TOKENIZER_FILE, TokenizerInfo, load_tokenizer
from clozeworks.schemas.errors import BadInputError, ClozeError
from clozeworks.schemas.kinds import PAIR_MODES
from clozeworks.schemas.manifest import (
    Manifest,
    ShardInfo,
    read_manifest,
)
from clozeworks.schemas.sidecars import TOKENIZER_DIR, local

# Sentence-pair label names by mode, in label order (docs/design.md, block members).
LABEL_NAMES = {
    "nsp": ("is_next", "not_next"),
    "sop": ("in_order", "swapped"),
    "sso": ("next", "previous", "random"),
}
DEFAULT_BATCH_SIZE = 32  # the trainer's default batch size
DEFAULT_TOP_K = 20
# Block problems listed per shard; a shard written wrongly throughout says so once or so.
MAX_BLOCK_PROBLEMS = 5

Progress = Callable[[int], None]


def new_block_stats(manifest: Manifest) -> BlockStats:
    return BlockStats(
        vocab_size=manifest.vocab_size,
        mask_id=manifest.special_tokens["mask"],
        max_len=manifest.max_seq_len,
        block_size=manifest.block_size,
        token_dtype=manifest.token_dtype,
        pairs=manifest.mode in PAIR_MODES,
        premasked=manifest.premask is not None,
    )


def read_shard(
    path: Path, info: ShardInfo, manifest: Manifest, verify: bool, progress: Progress | None = None
) -> tuple[str, BlockStats, list[str]]:
    """Decode every block of one shard, counting as it goes.

    Returns (state, stats, problems): state is "verified" (checksum and every block
    good), "decoded" (every block good, checksum not checked) or what went wrong first:
    "missing", "wrong size", "unreadable", "checksum mismatch", "undecodable",
    "inconsistent", "wrong count". `problems` says what, naming the block or byte where it can.
    """
    stats = new_block_stats(manifest)
    if not path.is_file():
        return "missing", stats, ["file is missing"]
    size = path.stat().st_size
    if size != info.bytes:
        return "wrong size", stats, [f"size {size} bytes, manifest says {info.bytes}"]
    try:
        return _read_stats(path, info, manifest, verify, stats, progress)
    except OSError as err:  # unreadable: permissions, an I/O error
        return "unreadable", stats, [f"cannot be read ({err.strerror or err})"]


def _read_stats(
    path: Path,
    info: ShardInfo,
    manifest: Manifest,
    verify: bool,
    stats: BlockStats,
    progress: Progress | None,
) -> tuple[str, BlockStats, list[str]]:
    size = info.bytes
    problems: list[str] = []
    state = ""
    # Hashing reads through ReadAhead, which hashes on a second thread; without it a
    # plain buffered file is a little faster.
    with open(path, "rb", buffering=0 if verify else -1) as f, ReadAhead(f, verify) as reader:
        stream = cast(IO[bytes], reader) if verify else f
        done = 0
        try:
            for key, block in iter_blocks_from(stream, path.name, load_npy_readonly):
                stats.add(key, block)
                if progress is not None:
                    progress(stream.tell() - done)
                    done = stream.tell()
        except ShardFormatError as err:
            problems.append(str(err).removeprefix(f"{path.name}: "))
            state = "undecodable"
        if verify and reader.hexdigest() != info.sha256:
            problems.insert(0, "sha256 does not match the manifest")
            state = "checksum mismatch"
        if progress is not None:
            progress(size - done)
    stats.token_counts.flush()
    if stats.token_counts.out_of_vocab:
        stats.problems.append(
            f"{stats.token_counts.out_of_vocab} token ids outside the vocabulary "
            f"of {manifest.vocab_size}"
        )
    if stats.problems:
        problems.extend(stats.problems[:MAX_BLOCK_PROBLEMS])
        if len(stats.problems) > MAX_BLOCK_PROBLEMS:
            problems.append(f"... and {len(stats.problems) - MAX_BLOCK_PROBLEMS} more like these")
        state = state or "inconsistent"
    if not state:
        read = (stats.sequences, stats.tokens, stats.blocks)
        listed = (info.sequences, info.tokens, info.blocks)
        if read != listed:
            problems.append(
                "read {} sequences, {} tokens, {} blocks; manifest says {}, {}, {}".format(
                    *read, *listed
                )
            )
            state = "wrong count"
    return state or ("verified" if verify else "decoded"), stats, problems


def shard_summary(
    directory: Path,
    verify: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    top_k: int = DEFAULT_TOP_K,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Statistics of a shard set read block by block (keys: docs/inspect.md).

    Top-level `shards`, `sequences`, `tokens`, `bytes` are the manifest's totals; the
    statistics cover the shards that read cleanly (`read`). `problems` lists every damaged
    shard as {"shard", "problem"} and is empty when all is well; with `verify` each
    shard's sha256 is checked too. BadInputError when `directory` is not a shard set.
    """
    manifest = read_manifest(directory)
    totals = new_block_stats(manifest)
    problems: list[dict[str, str]] = []
    warnings: list[str] = []
    per_shard = []
    read_shards = 0
    for info in manifest.shards:
        state, stats, shard_problems = read_shard(
            directory / info.name, info, manifest, verify, progress
        )
        problems.extend({"shard": info.name, "problem": p} for p in shard_problems)
        if state in ("verified", "decoded"):
            totals.merge(stats)
            read_shards += 1
        per_shard.append({**info.__dict__, "state": state})
    listed = {s.name for s in manifest.shards}
    for stray in sorted(p.name for p in directory.glob("shard-*.tar")):
        if stray not in listed:
            # `cloze shard` removes the shards of an earlier set: a stray one is from
            # somewhere else, and a published set should not carry it.
            message = f"{stray} is not in the manifest (ignored by readers)"
            if verify:
                problems.append({"shard": stray, "problem": "not in the manifest"})
            else:
                warnings.append(message)
    tokenizer = _tokenizer_copy(directory, manifest, verify, problems, warnings)
    return {
        "kind": "shards",
        "path": str(directory),
        "format_version": manifest.version,
        "mode": manifest.mode,
        "max_seq_len": manifest.max_seq_len,
        "block_size": manifest.block_size,
        "token_dtype": manifest.token_dtype,
        "vocab_kind": manifest.vocab_kind,
        "vocab_size": manifest.vocab_size,
        "premask": None if manifest.premask is None else manifest.premask.to_dict(),
        "dupe_factor": manifest.dupe_factor,
        "shards": len(manifest.shards),
        "blocks": sum(s.blocks for s in manifest.shards),
        "sequences": manifest.sequences,
        "tokens": manifest.tokens,
        "bytes": manifest.bytes,
        "bytes_per_token": manifest.bytes / max(1, manifest.tokens),
        "verified": verify,
        "read": {
            "shards": read_shards,
            "blocks": totals.blocks,
            "sequences": totals.sequences,
            "tokens": totals.tokens,
        },
        "sequence_length": totals.lengths.summary(histogram=True),
        "padding": padding_waste(totals.lengths, batch_size, manifest.max_seq_len),
        **_content_summaries(totals, manifest, tokenizer, top_k),
        "per_shard": per_shard,
        "build_stats": manifest.stats,
        "encoded_by": built_with(manifest),
        "problems": problems,
        "warnings": warnings,
    }


def _content_summaries(
    totals: BlockStats, manifest: Manifest, tokenizer: TokenizerInfo | None, top_k: int
) -> dict[str, Any]:
    specials = _special_ids(manifest, tokenizer)
    id_to_token = tokenizer.tokenizer.id_to_token if tokenizer is not None else _no_string
    tokens = totals.token_counts.summary(
        specials, manifest.special_tokens["unk"], id_to_token, top_k
    )
    if tokenizer is not None:
        counts = totals.token_counts.counts
        tokens["scripts"] = token_scripts(tokenizer.tokenizer, counts, specials.values())
    out: dict[str, Any] = {"token_stats": tokens, "pairs": None, "premasked": None}
    if totals.pairs:
        out["pairs"] = totals.pair_summary(LABEL_NAMES[manifest.mode])
    if totals.premasked:
        mask = manifest.special_tokens["mask"]
        maskable = tokens["content_tokens"] + int(totals.token_counts.counts[mask])
        out["premasked"] = totals.premask_summary(maskable)
    return out


def _no_string(_: int) -> None:
    return None


def _special_ids(manifest: Manifest, tokenizer: TokenizerInfo | None) -> dict[str, int]:
    """Special token string (or role, without a tokenizer) -> id."""
    if tokenizer is None:
        return {f"<{role}>": idx for role, idx in manifest.special_tokens.items()}
    out = {tok: tokenizer.special_ids[role] for role, tok in tokenizer.special.roles().items()}
    for idx in tokenizer.all_special_ids:
        token = tokenizer.tokenizer.id_to_token(idx)
        if token is not None:
            out.setdefault(token, idx)
    return out


def _tokenizer_copy(
    directory: Path,
    manifest: Manifest,
    verify: bool,
    problems: list[dict[str, str]],
    warnings: list[str],
) -> TokenizerInfo | None:
    """The shard set's tokenizer copy, for token strings; None (with a warning) if unusable."""
    where = local(directory, TOKENIZER_DIR)
    if not (where / TOKENIZER_FILE).is_file():
        message = f"no {where.name}/{TOKENIZER_FILE}: the set cannot be decoded or exported"
        if verify:  # a shard set is published with its tokenizer
            problems.append({"shard": f"{where.name}/", "problem": message})
        else:
            warnings.append(f"{message}; tokens are shown as ids")
        return None
    try:
        info = load_tokenizer(where)
    except ClozeError as err:
        # A damaged copy fails `train` (which takes it into the run) and `export` later.
        if verify:
            problems.append({"shard": f"{where.name}/", "problem": str(err)})
        warnings.append(f"{err}; tokens are shown as ids")
        return None
    if info.sha256 != manifest.tokenizer_sha256:
        message = f"{TOKENIZER_FILE}'s sha256 differs from the manifest's tokenizer fingerprint"
        if verify:
            problems.append({"shard": f"{where.name}/", "problem": message})
        else:
            warnings.append(f"{where.name}/: {message}")
    if info.vocab_size != manifest.vocab_size:
        warnings.append(
            f"{where.name}/ has {info.vocab_size} tokens, manifest says {manifest.vocab_size}"
        )
    return info


def decoding_tokenizer(directory: Path) -> TokenizerInfo:
    """The shard set's tokenizer copy; BadInputError if it has none to decode with."""
    where = local(directory, TOKENIZER_DIR)
    if not (where / TOKENIZER_FILE).is_file():
        raise BadInputError(f"{where}: no {TOKENIZER_FILE} to decode sequences with")
    return load_tokenizer(where)


def built_with(manifest: Manifest) -> dict[str, int]:
    """Sentences each encoder made, as the manifest's counters recorded (empty for sets
    built before they were)."""
    return {
        key.removeprefix(ENCODER_COUNTER): int(value)
        for key, value in manifest.stats.items()
        if key.startswith(ENCODER_COUNTER)
    }


def decode_examples(directory: Path, count: int) -> list[dict[str, Any]]:
    """The first `count` sequences of a shard set as text, with everything visible:
    special tokens in place, each pair's segments and label, and for pre-masked shards
    every prediction (position, what the input holds, the original token).
    BadInputError if the shard set has no tokenizer copy to decode with."""
    manifest = read_manifest(directory)
    info = decoding_tokenizer(directory)
    names = LABEL_NAMES.get(manifest.mode)
    out: list[dict[str, Any]] = []
    for shard in manifest.shards:
        if len(out) >= count:
            break
        try:
            for key, block in iter_blocks(directory / shard.name):
                for i in range(min(len(block), count - len(out))):
                    out.append(_example(info, block, key, i, names))
                if len(out) >= count:
                    break
        except ShardFormatError:
            continue  # a damaged shard is reported by the summary; show the next one
    return out


def _example(
    info: TokenizerInfo, block: Block, key: str, i: int, names: tuple[str, ...] | None
) -> dict[str, Any]:
    ids = block.sequence(i).tolist()
    decode = info.tokenizer.decode
    example: dict[str, Any] = {"block": key, "index": i, "length": len(ids)}
    if block.segments is not None:
        cut = int(block.segments[i])
        example["segment_a"] = decode(ids[:cut], skip_special_tokens=False)
        example["segment_b"] = decode(ids[cut:], skip_special_tokens=False)
        example["segment_a_length"] = cut
    else:
        example["text"] = decode(ids, skip_special_tokens=False)
    if block.labels is not None:
        label = int(block.labels[i])
        example["label"] = label
        example["label_name"] = names[label] if names and 0 <= label < len(names) else None
    if block.mlm_offsets is not None:
        positions, originals = block.predictions(i)
        mask_id = info.special_ids["mask"]
        to_token = info.tokenizer.id_to_token
        example["predictions"] = [
            {
                "position": int(p),
                "input": to_token(ids[p]) if 0 <= p < len(ids) else None,
                "original": to_token(int(o)),
                "action": _action(ids[p], int(o), mask_id) if 0 <= p < len(ids) else None,
            }
            for p, o in zip(positions.tolist(), originals.tolist(), strict=True)
        ]
    return example


def _action(stored: int, original: int, mask_id: int) -> str:
    if stored == mask_id:
        return "mask"
    return "unchanged" if stored == original else "random"
