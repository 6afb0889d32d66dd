"""`manifest.json`: what a shard directory holds. Written last; it is the commit marker.

A directory without a manifest is not a dataset. Readers check `version` first: a
manifest written by a newer clozeworks is refused rather than half understood.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clozeworks.schemas.errors import BadInputError, SchemaError
from clozeworks.schemas.kinds import PAIR_MODES, SHARD_MODES, ShardMode
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.schemas.sidecars import MANIFEST_FILE, local
from clozeworks.schemas.validate import MAX_JSON_BYTES, Fields, read_bounded

FORMAT_NAME = "clozeworks.shards"
FORMAT_VERSION = 1

TOKEN_DTYPES = ("uint16", "uint32")
# Pre-masked positions are stored as int16.
MAX_SEQ_LEN = 32767
# Sequences in one tar sample, which a reader holds whole.
MAX_BLOCK_SIZE = 1 << 16
# Ids a model embeds: 64 times the largest vocabulary in use (mT5's, about 250,000); a
# manifest claiming more would have the trainer allocate an embedding past any memory.
MAX_VOCAB_SIZE = 1 << 24
SPECIAL_ROLES = ("pad", "unk", "cls", "sep", "mask")

_SHARD_NAME = re.compile(r"^shard-\d{6}\.tar$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def shard_name(index: int) -> str:
    return f"shard-{index:06d}.tar"


def block_key(shard: int, block: int) -> str:
    """Tar sample key of a block; contains no dots, so webdataset splits members correctly."""
    return f"{shard:06d}_{block:06d}"


def token_dtype_for(vocab_size: int) -> str:
    return "uint16" if vocab_size <= 65536 else "uint32"


@dataclass(frozen=True)
class ShardInfo:
    name: str
    sequences: int
    tokens: int
    blocks: int
    bytes: int
    sha256: str

    @classmethod
    def from_fields(cls, f: Fields) -> ShardInfo:
        name = f.get_str("name")
        if not _SHARD_NAME.match(name):
            raise SchemaError(f.source, f"{f.path}.name", f"{name!r} is not shard-NNNNNN.tar")
        sha = f.get_str("sha256")
        if not _SHA256.match(sha):
            raise SchemaError(f.source, f"{f.path}.sha256", "expected 64 lowercase hex digits")
        return cls(
            name=name,
            sequences=f.get_int("sequences", minimum=0),
            tokens=f.get_int("tokens", minimum=0),
            blocks=f.get_int("blocks", minimum=0),
            bytes=f.get_int("bytes", minimum=0),
            sha256=sha,
        )


@dataclass(frozen=True)
class Manifest:
    mode: ShardMode
    max_seq_len: int
    vocab_size: int
    vocab_kind: str
    tokenizer_sha256: str
    special_tokens: dict[str, int]
    seed: int
    shards: tuple[ShardInfo, ...]
    block_size: int = 512
    token_dtype: str = "uint16"
    premask: MaskingSettings | None = None
    dupe_factor: int = 1
    # Everything else the build was run with (short_seq_prob, sentence splitter, ...).
    settings: dict[str, Any] = field(default_factory=dict)
    # What the build counted: documents read, sequences truncated, tokens dropped, ...
    stats: dict[str, Any] = field(default_factory=dict)
    created_by: str = ""
    version: int = FORMAT_VERSION

    @property
    def sequences(self) -> int:
        return sum(s.sequences for s in self.shards)

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.shards)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.shards)

    @property
    def is_pair_mode(self) -> bool:
        return self.mode in PAIR_MODES

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": self.version,
            "created_by": self.created_by,
            "mode": self.mode,
            "max_seq_len": self.max_seq_len,
            "block_size": self.block_size,
            "token_dtype": self.token_dtype,
            "vocab_size": self.vocab_size,
            "vocab_kind": self.vocab_kind,
            "tokenizer_sha256": self.tokenizer_sha256,
            "special_tokens": dict(self.special_tokens),
            "seed": self.seed,
            "premask": None if self.premask is None else self.premask.to_dict(),
            "dupe_factor": self.dupe_factor,
            "settings": self.settings,
            "stats": self.stats,
            "totals": {"sequences": self.sequences, "tokens": self.tokens, "bytes": self.bytes},
            "shards": [s.__dict__ for s in self.shards],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str = MANIFEST_FILE) -> Manifest:
        """Parse and validate; SchemaError names `source` and the first bad field."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise SchemaError(source, "<top>", f"not valid JSON ({err})") from None
        except RecursionError:  # Python's parser recurses once per level of nesting
            raise SchemaError(source, "<top>", "nested too deeply to be a manifest") from None
        return cls.from_dict(data, source)

    @classmethod
    def from_dict(cls, data: Any, source: str = MANIFEST_FILE) -> Manifest:
        f = Fields(source, data)
        if f.get_str("format") != FORMAT_NAME:
            raise SchemaError(
                source, "format", f"expected {FORMAT_NAME!r}, got {f.data['format']!r}"
            )
        version = f.get_int("version", minimum=1)
        if version > FORMAT_VERSION:
            raise SchemaError(
                source,
                "version",
                f"format version {version} is newer than this clozeworks reads "
                f"({FORMAT_VERSION}); upgrade clozeworks",
            )
        vocab_size = f.get_int("vocab_size", minimum=1, maximum=MAX_VOCAB_SIZE)
        token_dtype = f.get_choice("token_dtype", TOKEN_DTYPES)
        if token_dtype == "uint16" and vocab_size > 65536:
            raise SchemaError(source, "token_dtype", f"uint16 cannot hold vocab_size {vocab_size}")
        tok_sha = f.get_str("tokenizer_sha256")
        if not _SHA256.match(tok_sha):
            raise SchemaError(source, "tokenizer_sha256", "expected 64 lowercase hex digits")
        special = f.get_mapping("special_tokens", int)
        for role in SPECIAL_ROLES:
            if role not in special:
                raise SchemaError(source, f"special_tokens.{role}", "missing")
            if not 0 <= special[role] < vocab_size:
                raise SchemaError(source, f"special_tokens.{role}", "id outside the vocabulary")
        premask_fields = f.get_obj("premask", None)
        shards = tuple(ShardInfo.from_fields(s) for s in f.get_list("shards"))
        manifest = cls(
            version=version,
            created_by=f.get_str("created_by", ""),
            mode=f.get_choice("mode", SHARD_MODES),
            max_seq_len=f.get_int("max_seq_len", minimum=8, maximum=MAX_SEQ_LEN),
            block_size=f.get_int("block_size", minimum=1, maximum=MAX_BLOCK_SIZE),
            token_dtype=token_dtype,
            vocab_size=vocab_size,
            vocab_kind=f.get_str("vocab_kind"),
            tokenizer_sha256=tok_sha,
            special_tokens=special,
            seed=f.get_int("seed"),
            premask=None if premask_fields is None else MaskingSettings.from_fields(premask_fields),
            dupe_factor=f.get_int("dupe_factor", 1, minimum=1),
            settings=dict(f.get_obj("settings", {}).data) if f.data.get("settings") else {},
            stats=dict(f.get_obj("stats", {}).data) if f.data.get("stats") else {},
            shards=shards,
        )
        manifest._check_shards(source)
        totals = f.get_obj("totals", None)
        if totals is not None:  # written for people; must agree with what it summarizes
            manifest._check_totals(source, totals)
        return manifest

    def _check_totals(self, source: str, totals: Fields) -> None:
        for key in ("sequences", "tokens", "bytes"):
            stated = totals.get_int(key, None)
            actual = getattr(self, key)
            if stated is not None and stated != actual:
                raise SchemaError(
                    source, f"totals.{key}", f"says {stated} but the shards add up to {actual}"
                )

    def _check_shards(self, source: str) -> None:
        if not self.shards:
            # `cloze shard` never commits an empty set; a manifest without shards is damage.
            raise SchemaError(source, "shards", "empty: a shard set has at least one shard")
        names = [s.name for s in self.shards]
        if len(set(names)) != len(names):
            raise SchemaError(source, "shards", "a shard name appears twice")
        if self.shards:
            sizes = [s.sequences for s in self.shards]
            if max(sizes) - min(sizes) > 1:
                raise SchemaError(
                    source,
                    "shards",
                    f"shard sizes differ by more than one ({min(sizes)}..{max(sizes)})",
                )
        for i, s in enumerate(self.shards):
            if s.blocks != -(-s.sequences // self.block_size):
                raise SchemaError(
                    source,
                    f"shards[{i}].blocks",
                    f"{s.blocks} blocks cannot hold {s.sequences} sequences",
                )


def read_manifest(directory: str | Path) -> Manifest:
    """The manifest of a local shard directory; BadInputError if it is not a dataset."""
    path = local(directory, MANIFEST_FILE)
    if not Path(directory).is_dir():
        raise BadInputError(f"{directory}: no such shard directory")
    if not path.is_file():
        raise BadInputError(
            f"{directory}: no {MANIFEST_FILE}, so this is not a finished shard set "
            "(the build was interrupted or this is the wrong directory)"
        )
    raw = read_bounded(path, MAX_JSON_BYTES, "manifest")
    return Manifest.from_json(raw.decode("utf-8", "replace"), source=str(path))
