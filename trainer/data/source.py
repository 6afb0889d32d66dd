"""Where shards come from: a directory, a URL, or a list of paths, URLs and `pipe:` commands.

`resolve_source` reads and checks the manifest (format version, tokenizer fingerprint) and
returns a `ShardSet`: every shard the run will read, with its URL, what the manifest
promises about it, and the global index of its first sequence (its place in the
manifest's order, so masks do not change when a subset of shards is read).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from clozeworks.corpus.shards.cache import (
    DEFAULT_LIMIT,
    RETRIES,
    ShardCache,
    is_remote,
    read_any,
    read_first,
)
from clozeworks.corpus.shards.masking import MaskTables
from clozeworks.corpus.shards.reader import ShardSpec, is_local, local_path, shard_index
from clozeworks.corpus.shards.words import segmented_words
from clozeworks.corpus.vocab.files import (
    DIRECTORY_FILES,
    TOKEN_COUNTS_FILE,
    parse_token_counts,
    read_token_counts,
    token_strings,
)
from clozeworks.corpus.vocab.train import SENTINEL, tokenizer_kind, word_start_table
from clozeworks.schemas.errors import BadInputError, SchemaError, UsageError
from clozeworks.schemas.manifest import Manifest
from clozeworks.schemas.sidecars import MANIFEST_FILE, TOKENIZER_DIR, names_of
from clozeworks.schemas.special_tokens import special_tokens_for
from clozeworks.schemas.validate import MAX_TOKENIZER_BYTES, read_bounded

TOKENIZER_JSON = "tokenizer.json"

Source = str | Path | Sequence[str | Path]


@dataclass(frozen=True)
class ShardSet:
    manifest: Manifest
    location: str  # for messages
    urls: tuple[str, ...]  # one per shard read, in manifest order
    specs: tuple[ShardSpec, ...]
    first_index: tuple[int, ...]  # global index of each shard's first sequence
    tokenizer_url: str | None  # tokenizer.json shipped with the shards, if any
    cache: ShardCache | None = None  # where remote shards are kept on local disk
    # The sequences [lo, hi) of each shard that this set reads (None: all of them).
    ranges: tuple[tuple[int, int], ...] | None = None

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(hi - lo for lo, hi in map(self.span, range(len(self.specs))))

    def span(self, i: int) -> tuple[int, int]:
        return self.ranges[i] if self.ranges is not None else (0, self.specs[i].sequences)

    def split(self, share: float) -> tuple[ShardSet, ShardSet]:
        """(training part, held-out part): the held-out part is the last sequences of each
        shard, round(share x all) of them in all, spread over the shards in proportion to
        their sizes (largest remainders first). A function of the shard sizes alone, so
        the same on every rank, world size and resume; the build shuffled sequences across
        the corpus, so a shard's tail is a random sample of it."""
        sizes = np.array([s.sequences for s in self.specs], dtype=np.int64)
        total = round(share * int(sizes.sum()))
        exact = sizes * (total / max(1, int(sizes.sum())))
        held = np.floor(exact).astype(np.int64)
        order = np.argsort(-(exact - held), kind="stable")
        held[order[: total - int(held.sum())]] += 1
        train = tuple((0, int(n - h)) for n, h in zip(sizes, held, strict=True))
        heldout = tuple((int(n - h), int(n)) for n, h in zip(sizes, held, strict=True))
        return replace(self, ranges=train), replace(self, ranges=heldout)

    def readable_url(self, i: int) -> str:
        """Where shard i is read from: its URL, or its copy in the cache for remote ones
        (downloaded first; ShardFormatError naming the shard and offset if that fails)."""
        url = self.urls[i]
        if self.cache is None or not is_remote(url):
            return url
        return self.cache.fetch(url, self.specs[i])


def resolve_source(
    source: Source,
    manifest: str | Path | None = None,
    cache_root: Path | None = None,
    cache_limit: int = DEFAULT_LIMIT,
) -> ShardSet:
    """Resolve `source` into a ShardSet. BadInputError naming the place on any problem.

    - a local directory or a URL of one (`s3://bucket/shards`): its .manifest.json (or
      the manifest.json of a set written before), every shard in it;
    - a list of shard paths, URLs or `pipe:` commands (a string with `{000000..000009}`
      braces is expanded, as webdataset does): those shards only; the manifest is
      `manifest` if given, else .manifest.json beside the first entry (for a pipe, the
      same command with its last `shard-NNNNNN.tar` replaced by `.manifest.json`).

    Remote shards (URLs and pipes) are read through a `ShardCache` in `cache_root`
    (default: `default_cache_root()`) holding at most `cache_limit` bytes.
    """
    if isinstance(source, str | Path) and "{" not in str(source):
        base = str(source).rstrip("/")
        candidates = [f"{base}/{name}" for name in names_of(MANIFEST_FILE)]
        man, text, era = _read_manifest(candidates, directory=base)
        urls = {s.name: f"{base}/{s.name}" for s in man.shards}
        tok = f"{base}/{names_of(TOKENIZER_DIR)[era]}/{TOKENIZER_JSON}"
        cache = _cache(base, text, list(urls.values()), cache_root, cache_limit)
        return _shard_set(man, base, urls, tok, cache)
    entries = _expand(source)
    if not entries:
        raise UsageError("the list of shards is empty")
    candidates = [str(manifest)] if manifest is not None else _manifests_beside(entries[0])
    man, text, era = _read_manifest(candidates, directory=None)
    man_url = candidates[era]
    known = {shard_index(s.name): s.name for s in man.shards}
    urls: dict[str, str] = {}
    for entry in entries:
        try:
            name = known.get(shard_index(entry))
        except ValueError:
            raise UsageError(f"{entry}: no shard-NNNNNN.tar in this entry") from None
        if name is None:
            raise BadInputError(f"{entry}: {man_url} lists no such shard")
        if name in urls:
            raise UsageError(f"{entry}: {name} is listed twice")
        urls[name] = entry
    tok = _tokenizer_beside(man_url)
    cache = _cache(man_url, text, list(urls.values()), cache_root, cache_limit)
    return _shard_set(man, man_url, urls, tok, cache)


def _manifests_beside(entry: str) -> list[str]:
    """Where the manifest of shard `entry` may be: under its name, then its earlier one."""
    if not entry.startswith("pipe:"):
        return [posixpath.join(posixpath.dirname(entry), n) for n in names_of(MANIFEST_FILE)]
    found = list(re.finditer(r"shard-\d{6}\.tar", entry))
    if not found:
        raise UsageError(f"{entry}: no shard-NNNNNN.tar in this pipe: command; pass manifest=")
    last = found[-1]
    return [entry[: last.start()] + n + entry[last.end() :] for n in names_of(MANIFEST_FILE)]


def _tokenizer_beside(manifest: str) -> str | None:
    """tokenizer.json of the set whose manifest is at `manifest` (a set with the earlier
    manifest name has the earlier tokenizer name); for a pipe, the same command with the
    manifest's name replaced, and None when the command does not name it."""
    for name, directory in zip(names_of(MANIFEST_FILE), names_of(TOKENIZER_DIR), strict=True):
        head, sep, tail = manifest.rpartition(name)
        if not sep:
            continue
        if manifest.startswith("pipe:"):
            return f"{head}{directory}/{TOKENIZER_JSON}{tail}"
        return posixpath.join(posixpath.dirname(manifest), directory, TOKENIZER_JSON)
    if manifest.startswith("pipe:"):
        return None
    return posixpath.join(posixpath.dirname(manifest), TOKENIZER_DIR, TOKENIZER_JSON)


def _cache(
    location: str, text: str, urls: list[str], root: Path | None, limit: int
) -> ShardCache | None:
    if not any(is_remote(u) for u in urls):
        return None
    cache = ShardCache.for_source(location, root, limit)
    try:
        cache.adopt_manifest(text)
    except OSError as err:
        raise BadInputError(f"{cache.directory}: cannot use the shard cache ({err})") from None
    return cache


def _expand(source: Source) -> list[str]:
    items = [source] if isinstance(source, str | Path) else list(source)
    out: list[str] = []
    for item in items:
        text = str(item)
        if "{" in text:
            from braceexpand import braceexpand  # a webdataset dependency

            out.extend(braceexpand(text))
        else:
            out.append(text)
    return out


def _read_manifest(urls: list[str], directory: str | None) -> tuple[Manifest, str, int]:
    """The manifest at the first of `urls` that can be read, its text and that index."""
    if directory is not None and is_local(directory) and not Path(local_path(directory)).is_dir():
        raise BadInputError(f"{directory}: no such shard directory")
    if directory is not None and all(
        is_local(u) and not Path(local_path(u)).is_file() for u in urls
    ):
        raise BadInputError(
            f"{directory}: no {MANIFEST_FILE}, so this is not a finished shard set "
            "(the build was interrupted or this is the wrong directory)"
        )
    try:
        data, index = read_first(urls)
        text = data.decode("utf-8")
    except OSError as err:
        where = directory or urls[0]
        raise BadInputError(
            f"{where}: cannot read {MANIFEST_FILE} ({err}); without it this is not a finished "
            "shard set (the build was interrupted or this is the wrong place)"
        ) from None
    except UnicodeDecodeError:
        raise BadInputError(f"{urls[0]}: not a text manifest") from None
    try:
        return Manifest.from_json(text, source=urls[index]), text, index
    except SchemaError as err:
        raise BadInputError(str(err)) from None


def _shard_set(
    man: Manifest,
    location: str,
    urls: dict[str, str],
    tokenizer_url: str | None,
    cache: ShardCache | None = None,
) -> ShardSet:
    starts = np.concatenate([[0], np.cumsum([s.sequences for s in man.shards])])
    chosen = [(i, s) for i, s in enumerate(man.shards) if s.name in urls]
    return ShardSet(
        manifest=man,
        location=location,
        urls=tuple(urls[s.name] for _, s in chosen),
        specs=tuple(ShardSpec.from_manifest(man, s) for _, s in chosen),
        first_index=tuple(int(starts[i]) for i, _ in chosen),
        tokenizer_url=tokenizer_url,
        cache=cache,
    )


def mask_tables(
    shards: ShardSet,
    tokenizer: str | Path | None,
    tokenizer_sha256: str | None,
    needs_words: bool,
    wants_counts: bool = False,
) -> MaskTables:
    """The masking tables for the shards' vocabulary, after checking fingerprints.

    The tokenizer is `tokenizer` (a directory or tokenizer.json) if given, else the copy
    shipped with the shards. Its sha256 must equal the manifest's, and so must
    `tokenizer_sha256` when given. Word starts (for wwm, span, ngram) need a tokenizer,
    and for the shards' `language` written without spaces its segmenter (words.py);
    replacements by frequency (`wants_counts`) its token_counts.json (uniform, with a
    warning, without one).
    """
    man = shards.manifest
    checked = checked_tokenizer(shards, tokenizer, tokenizer_sha256)
    special = set(man.special_tokens.values())
    word_start, words = None, None
    if checked is not None:
        word_start = checked.word_start
        special |= checked.added_special
        if needs_words:
            tok = checked.tokenizer
            sp = special_tokens_for(tokenizer_kind(tok))
            words = segmented_words(man.settings.get("language"), token_strings(tok), sp)
    elif needs_words:
        raise BadInputError(
            f"{shards.location}: whole-word, span and n-gram masking need the tokenizer to "
            "find word starts; none ships with these shards, so pass tokenizer=DIR"
        )
    counts = _token_counts(shards, tokenizer, man.vocab_size) if wants_counts else None
    if wants_counts and counts is None:
        warnings.warn(
            f"{shards.location}: no {TOKEN_COUNTS_FILE} with the tokenizer (cloze vocab writes "
            "one); random replacements are drawn uniformly, not by corpus frequency",
            stacklevel=3,
        )
    mask_id = man.special_tokens["mask"]
    return MaskTables.build(man.vocab_size, sorted(special), word_start, mask_id, counts, words)


@dataclass(frozen=True)
class CheckedTokenizer:
    tokenizer: Tokenizer
    where: str
    word_start: list[bool]
    added_special: set[int]


def checked_tokenizer(
    shards: ShardSet, tokenizer: str | Path | None, tokenizer_sha256: str | None
) -> CheckedTokenizer | None:
    """The tokenizer the shards were encoded with (`tokenizer` if given, else the copy
    shipped with them; None when there is neither), after checking that its sha256 and
    vocabulary size are the manifest's, and that `tokenizer_sha256`, when given, is too."""
    man = shards.manifest
    if tokenizer_sha256 is not None and tokenizer_sha256 != man.tokenizer_sha256:
        raise BadInputError(
            f"{shards.location}: shards were encoded with a different tokenizer "
            f"({man.tokenizer_sha256[:12]} in the manifest, the run uses {tokenizer_sha256[:12]})"
        )
    data, where = _tokenizer_json(shards, tokenizer)
    if data is None:
        return None
    digest = hashlib.sha256(data).hexdigest()
    if digest != man.tokenizer_sha256:
        raise BadInputError(
            f"{where}: this tokenizer ({digest[:12]}) is not the one the shards were "
            f"encoded with ({man.tokenizer_sha256[:12]})"
        )
    tok, word_start, added = _tokenizer_facts(data, where)
    if tok.get_vocab_size(with_added_tokens=True) != man.vocab_size:
        raise BadInputError(f"{where}: vocabulary size differs from the manifest's")
    return CheckedTokenizer(tok, where, word_start, added)


def _token_counts(shards: ShardSet, tokenizer: str | Path | None, vocab: int) -> list[int] | None:
    if tokenizer is not None:
        return read_token_counts(tokenizer, vocab)
    where = _beside_tokenizer(shards, TOKEN_COUNTS_FILE)
    if where is None:
        return None
    try:
        data = read_any(where, retries=0)  # absent for tokenizers cloze vocab did not write
    except OSError:
        return None
    return parse_token_counts(data, vocab, where)


def _beside_tokenizer(shards: ShardSet, name: str) -> str | None:
    """Where file `name` of the shards' tokenizer directory is (for a pipe: the same
    command with tokenizer.json replaced), or None when no tokenizer ships."""
    url = shards.tokenizer_url
    if url is None:
        return None
    head, _, tail = url.rpartition(TOKENIZER_JSON)
    return f"{head}{name}{tail}"


def _tokenizer_json(shards: ShardSet, tokenizer: str | Path | None) -> tuple[bytes | None, str]:
    if tokenizer is not None:
        path = Path(tokenizer)
        path = path / TOKENIZER_JSON if path.is_dir() else path
        return read_bounded(path, MAX_TOKENIZER_BYTES, "tokenizer file"), str(path)
    url = shards.tokenizer_url
    if url is None:
        return None, ""
    try:
        data = read_any(url)
    except OSError:
        return None, ""
    if shards.cache is not None:
        shards.cache.keep_file(f"{TOKENIZER_DIR}/{TOKENIZER_JSON}", data)
    return data, url


def _tokenizer_facts(data: bytes, where: str) -> tuple[Tokenizer, list[bool], set[int]]:
    try:
        tok = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as err:  # tokenizers raises bare Exception subclasses on bad files
        raise BadInputError(f"{where}: not a tokenizer ({err})") from None
    table = word_start_table(tok, special_tokens_for(tokenizer_kind(tok)))
    added = {i for i, t in tok.get_added_tokens_decoder().items() if t.special}
    return tok, table, added


def tokenizer_files(shards: ShardSet) -> dict[str, bytes]:
    """The tokenizer directory shipped with the shards, file name -> bytes (what a copy
    of a tokenizer directory takes; empty when none ships), read from any source."""
    files = {}
    for name in DIRECTORY_FILES:
        where = _beside_tokenizer(shards, name)
        if where is None:
            return {}
        try:
            # The optional files are absent for some kinds: no retrying for those.
            files[name] = read_any(where, retries=RETRIES if name == TOKENIZER_JSON else 0)
        except OSError:
            continue  # this tokenizer kind has no such file
    return files


def sentinel_ids(
    shards: ShardSet, tokenizer: str | Path | None, tokenizer_sha256: str | None = None
) -> list[int]:
    """Ids of `<extra_id_0>`, `<extra_id_1>`, ... in the shards' (checked) tokenizer: T5's
    sentinels, which `cloze vocab --sentinels N` adds; UsageError when there are none."""
    checked = checked_tokenizer(shards, tokenizer, tokenizer_sha256)
    if checked is None:
        raise BadInputError(
            f"{shards.location}: T5's span corruption needs the tokenizer's sentinel ids; "
            "none ships with these shards, so pass tokenizer=DIR"
        )
    ids: list[int] = []
    while (found := checked.tokenizer.token_to_id(SENTINEL.format(len(ids)))) is not None:
        ids.append(found)
    if not ids:
        raise UsageError(
            f"{checked.where}: no sentinel tokens (<extra_id_0>, ...) for T5's span "
            "corruption; train the vocabulary with cloze vocab --sentinels 100"
        )
    return ids
