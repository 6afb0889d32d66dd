"""`stats.json` (a document store's, written last: its commit marker) and `vocab_stats.json`
(beside a tokenizer `cloze vocab` wrote), as typed records.

stats.json is one JSON object: `stage`, the four figures `documents_in`, `documents_out`,
`bytes_in`, `bytes_out`, every drop reason as `dropped.<reason>`, for dedup `duplicates`
and the stage's other counters and settings, and dedup's `upstream` (the stats.json of the
store it read). For every stage `documents_in = documents_out + sum(dropped.*)`, plus
`duplicates` for dedup; a file that says otherwise is refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clozeworks.schemas.errors import BadInputError, SchemaError
from clozeworks.schemas.validate import Fields

STORE_STATS_VERSION = 1
VOCAB_STATS_VERSION = 1
DROPPED = "dropped."
FIGURES = ("documents_in", "documents_out", "bytes_in", "bytes_out")
# A chain of stores longer than this is not one a pipeline wrote (and would recurse).
MAX_UPSTREAM = 16


@dataclass(frozen=True)
class StoreStats:
    stage: str
    documents_in: int
    documents_out: int
    bytes_in: int = 0
    bytes_out: int = 0
    dropped: dict[str, int] = field(default_factory=dict)  # by reason
    duplicates: int = 0
    # Everything else the stage recorded (its settings, counters, clusters), as written.
    details: dict[str, Any] = field(default_factory=dict)
    upstream: StoreStats | None = None
    # A dedup of several stores: each input's record, in order (`upstream` is then None).
    upstreams: tuple[StoreStats, ...] = ()
    version: int = STORE_STATS_VERSION

    def __post_init__(self) -> None:
        removed = self.documents_out + sum(self.dropped.values()) + self.duplicates
        if self.documents_in != removed:
            raise ValueError(
                f"documents_in {self.documents_in} is not documents_out + dropped + duplicates "
                f"({removed})"
            )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": self.version, **self.details}
        if self.stage:
            out["stage"] = self.stage
        out.update({name: getattr(self, name) for name in FIGURES})
        out.update({f"{DROPPED}{reason}": n for reason, n in self.dropped.items()})
        if self.stage == "dedup" or self.duplicates:
            out["duplicates"] = self.duplicates
        if self.upstream is not None:
            out["upstream"] = self.upstream.to_json()
        if self.upstreams:
            out["upstreams"] = [u.to_json() for u in self.upstreams]
        return out

    @property
    def inputs(self) -> tuple[StoreStats, ...]:
        """The records of the stores this one was made from (none for clean's)."""
        return (self.upstream,) if self.upstream is not None else self.upstreams

    @classmethod
    def from_json(cls, data: Any, source: str, depth: int = 0) -> StoreStats:
        """SchemaError naming `source` and the field for a file no stage wrote."""
        if depth > MAX_UPSTREAM:
            raise SchemaError(source, "upstream", f"nested more than {MAX_UPSTREAM} deep")
        f = Fields(source, data)
        version = f.get_int("version", 1)
        if version > STORE_STATS_VERSION:
            raise SchemaError(source, "version", f"{version} is newer than {STORE_STATS_VERSION}")
        dropped = {
            key.removeprefix(DROPPED): f.get_int(key, minimum=0)
            for key in data
            if key.startswith(DROPPED)
        }
        upstream = data.get("upstream")
        several = data.get("upstreams", [])
        if not isinstance(several, list) or (several and upstream is not None):
            raise SchemaError(source, "upstreams", "must be a list, and only without upstream")
        known = {"version", "stage", "duplicates", "upstream", "upstreams", *FIGURES}
        documents_out = f.get_int("documents_out", minimum=0)
        duplicates = f.get_int("duplicates", 0, minimum=0)
        # A store made by hand may say only what it holds.
        implied = documents_out + sum(dropped.values()) + duplicates
        try:
            return cls(
                stage=f.get_str("stage", ""),
                documents_in=f.get_int("documents_in", implied, minimum=0),
                documents_out=documents_out,
                # Stores written before the stages counted bytes have none.
                bytes_in=f.get_int("bytes_in", 0, minimum=0),
                bytes_out=f.get_int("bytes_out", 0, minimum=0),
                dropped=dropped,
                duplicates=duplicates,
                details={
                    k: v for k, v in data.items() if k not in known and not k.startswith(DROPPED)
                },
                upstream=None
                if upstream is None
                else cls.from_json(upstream, f"{source} (upstream)", depth + 1),
                upstreams=tuple(
                    cls.from_json(u, f"{source} (upstreams[{i}])", depth + 1)
                    for i, u in enumerate(several)
                ),
                version=version,
            )
        except ValueError as err:
            raise SchemaError(source, "documents_in", str(err)) from None

    @classmethod
    def read(cls, text: str | bytes, source: str) -> StoreStats:
        """From the file's text; BadInputError naming `source` if it is not JSON."""
        try:
            data = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise BadInputError(f"{source}: not valid JSON ({err})") from None
        except RecursionError:
            raise BadInputError(f"{source}: nested too deep to be a stats.json") from None
        if not isinstance(data, Mapping):
            raise BadInputError(f"{source}: expected a JSON object")
        return cls.from_json(data, source)


@dataclass(frozen=True)
class SampleFigures:
    """The training sample a vocabulary was trained on."""

    seed: int
    rate: float
    documents: int
    bytes: int
    sample_docs: int | None
    sample_bytes: int | None
    store_documents: int


@dataclass(frozen=True)
class VocabStats:
    """vocab_stats.json: the vocabulary, its training sample, and its figures on the
    held-out sample (`heldout`: rate, documents, words, chars, tokens, unk_tokens, unk_rate,
    tokens_per_word, chars_per_token, vocab_used, vocab_used_share, and `by_script`: words,
    tokens, unk_tokens, tokens_per_word and unk_rate for each script's words; rates None
    where a count they divide by is 0)."""

    kind: str
    vocab_size: int
    lowercase: bool
    input: str
    sample: SampleFigures
    heldout: dict[str, Any]
    # WordPiece: what the alphabet kept of the sample's characters (corpus.vocab.alphabet.
    # alphabet_report); None for the other kinds and for files written before it was kept.
    alphabet: dict[str, Any] | None = None
    # "morphemes:mecab" when the sample was cut at its morphemes before training (KLUE's
    # recipe, corpus/vocab/morphemes.py); "words" otherwise (not written then).
    pre_tokenize: str = "words"
    # "jamo" when Hangul was learned as conjoining jamo (corpus/vocab/jamo.py); "syllables"
    # otherwise (not written then).
    hangul: str = "syllables"
    version: int = VOCAB_STATS_VERSION

    def to_json(self) -> dict[str, Any]:
        out = {
            "version": self.version,
            "kind": self.kind,
            "vocab_size": self.vocab_size,
            "lowercase": self.lowercase,
            "input": self.input,
            "sample": dict(self.sample.__dict__),
            "heldout": dict(self.heldout),
        }
        if self.pre_tokenize != "words":  # a vocabulary of words reads as it always has
            out["pre_tokenize"] = self.pre_tokenize
        if self.hangul != "syllables":
            out["hangul"] = self.hangul
        if self.alphabet is not None:
            out["alphabet"] = dict(self.alphabet)
        return out

    @classmethod
    def from_json(cls, data: Any, source: str) -> VocabStats:
        f = Fields(source, data)
        version = f.get_int("version")
        if version > VOCAB_STATS_VERSION:
            raise SchemaError(source, "version", f"{version} is newer than {VOCAB_STATS_VERSION}")
        s = f.get_obj("sample")
        heldout = f.get_obj("heldout")
        if s is None or heldout is None:
            raise SchemaError(source, "sample" if s is None else "heldout", "missing")
        sample = SampleFigures(
            seed=s.get_int("seed"),
            rate=s.get_float("rate"),
            documents=s.get_int("documents", minimum=0),
            bytes=s.get_int("bytes", minimum=0),
            sample_docs=s.get_int("sample_docs", None, minimum=0),
            sample_bytes=s.get_int("sample_bytes", None, minimum=0),
            store_documents=s.get_int("store_documents", minimum=0),
        )
        rate = heldout.get_float("rate")
        alphabet = f.get_obj("alphabet") if "alphabet" in f.data else None
        return cls(
            kind=f.get_str("kind"),
            vocab_size=f.get_int("vocab_size", minimum=1),
            lowercase=bool(f.data.get("lowercase")),
            input=f.get_str("input"),
            sample=sample,
            heldout={**heldout.data, "rate": rate},
            alphabet=None if alphabet is None else dict(alphabet.data),
            pre_tokenize=f.get_str("pre_tokenize", "words"),
            hangul=f.get_str("hangul", "syllables"),
            version=version,
        )
