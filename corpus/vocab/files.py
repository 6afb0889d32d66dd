"""The Hugging Face tokenizer directory: writing it, loading it (ours, one a user already
has, or a plain BERT `vocab.txt`), and copying it beside a shard set.

`transformers` 5 rebuilds BERT and RoBERTa tokenizers from their class rather than from
`tokenizer.json` (it takes only the vocabulary, merges and post-processor from the file), so
`tokenizer_config.json` names `BertTokenizer` / `RobertaTokenizer` only when our pipeline is
exactly what that class builds; anything else is `PreTrainedTokenizerFast`, which loads
`tokenizer.json` as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from clozeworks.schemas.errors import BadInputError
from clozeworks.schemas.special_tokens import SpecialTokens, special_tokens_for
from clozeworks.schemas.validate import MAX_TOKENIZER_BYTES, loads, read_bounded

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
SPECIAL_MAP_FILE = "special_tokens_map.json"
VOCAB_STATS_FILE = "vocab_stats.json"
# Per-id counts over the held-out sample: SpanBERT's random replacements follow them.
TOKEN_COUNTS_FILE = "token_counts.json"
# What a tokenizer directory may hold; copies take these and nothing else.
DIRECTORY_FILES = (
    TOKENIZER_FILE,
    CONFIG_FILE,
    SPECIAL_MAP_FILE,
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    VOCAB_STATS_FILE,
    TOKEN_COUNTS_FILE,
)
MODEL_MAX_LENGTH = 512
_ROLES = ("pad", "unk", "cls", "sep", "mask")


def add_post_processor(tok: Tokenizer, kind: str, sp: SpecialTokens) -> None:
    """`[CLS] A [SEP] B [SEP]` with token types 0/1 (BERT, ALBERT); RoBERTa's
    `<s> A </s></s> B </s>` with no token types for byte-level BPE."""
    cls_id, sep_id = tok.token_to_id(sp.cls), tok.token_to_id(sp.sep)
    if cls_id is None or sep_id is None:
        raise BadInputError(f"the tokenizer has no {sp.cls} or {sp.sep} token")
    if kind == "bpe":
        tok.post_processor = processors.RobertaProcessing(
            (sp.sep, sep_id), (sp.cls, cls_id), trim_offsets=True, add_prefix_space=False
        )
        return
    tok.post_processor = processors.TemplateProcessing(
        single=f"{sp.cls}:0 $A:0 {sp.sep}:0",
        pair=f"{sp.cls}:0 $A:0 {sp.sep}:0 $B:1 {sp.sep}:1",
        special_tokens=[(sp.cls, cls_id), (sp.sep, sep_id)],
    )


def hf_class(spec: dict[str, Any], kind: str) -> str:
    """The `tokenizer_class` AutoTokenizer should build for a tokenizer.json `spec`:
    BertTokenizer / RobertaTokenizer only when it is exactly the pipeline that class
    builds, else PreTrainedTokenizerFast."""
    if kind == "wordpiece" and _is_bert(spec):
        return "BertTokenizer"
    if kind == "bpe" and _is_roberta(spec):
        return "RobertaTokenizer"
    return "PreTrainedTokenizerFast"


def _is_bert(spec: dict[str, Any]) -> bool:
    norm, pre, model = spec.get("normalizer") or {}, spec.get("pre_tokenizer") or {}, spec["model"]
    return (
        norm.get("type") == "BertNormalizer"
        and norm.get("clean_text") is True
        and norm.get("handle_chinese_chars") is True
        and norm.get("strip_accents") in (None, norm.get("lowercase"))
        and pre.get("type") == "BertPreTokenizer"
        and model.get("continuing_subword_prefix") == "##"
        and model.get("max_input_chars_per_word") == 100
    )


def _is_roberta(spec: dict[str, Any]) -> bool:
    pre, model = spec.get("pre_tokenizer") or {}, spec["model"]
    return (
        spec.get("normalizer") is None
        and pre.get("type") == "ByteLevel"
        and pre.get("add_prefix_space") is False
        and pre.get("use_regex", True) is True
        and not model.get("dropout")
        and not model.get("continuing_subword_prefix")
        and not model.get("end_of_word_suffix")
        and not model.get("fuse_unk")
        and not model.get("byte_fallback")
    )


def write_tokenizer_dir(
    tok: Tokenizer,
    directory: str | Path,
    kind: str,
    extra_special_tokens: tuple[str, ...] = (),
    sp: SpecialTokens | None = None,
) -> None:
    """Write `tokenizer.json`, `tokenizer_config.json`, `special_tokens_map.json` and
    `vocab.txt` (WordPiece) or `vocab.json` + `merges.txt` (BPE) into an existing directory."""
    out = Path(directory)
    sp = sp or special_tokens_for(kind)
    text = tok.to_str()
    spec = json.loads(text)
    (out / TOKENIZER_FILE).write_bytes(text.encode("utf-8"))
    special_map: dict[str, Any] = {
        "pad_token": sp.pad,
        "unk_token": sp.unk,
        "cls_token": sp.cls,
        "sep_token": sp.sep,
        "mask_token": sp.mask,
    }
    if kind != "wordpiece":
        special_map.update(bos_token=sp.cls, eos_token=sp.sep)
    if extra_special_tokens:
        special_map["additional_special_tokens"] = list(extra_special_tokens)
    config: dict[str, Any] = {
        "tokenizer_class": hf_class(spec, kind),
        "model_max_length": MODEL_MAX_LENGTH,
        "clean_up_tokenization_spaces": False,
        # Segment ids for BERT's and ALBERT's pairs; RoBERTa has none.
        "model_input_names": ["input_ids", "attention_mask"]
        if kind == "bpe"
        else ["input_ids", "token_type_ids", "attention_mask"],
        "clozeworks_kind": kind,
        **special_map,
    }
    if kind == "wordpiece":
        # strip_accents None: accents go with lowercasing, as in BERT's uncased models.
        config.update(
            do_lower_case=_lowercases(tok), strip_accents=None, tokenize_chinese_chars=True
        )
    if kind == "bpe":
        # RoBERTa: no space is added before the first word, so "Hello" and " Hello" differ.
        config.update(add_prefix_space=False, trim_offsets=True)
    _write_json(out / CONFIG_FILE, config)
    _write_json(out / SPECIAL_MAP_FILE, special_map)
    model = spec["model"]
    if kind == "wordpiece":
        ordered = sorted(model["vocab"].items(), key=_by_id)
        (out / "vocab.txt").write_text("".join(f"{t}\n" for t, _ in ordered), encoding="utf-8")
    elif kind == "bpe":
        _write_json(out / "vocab.json", model["vocab"])
        merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
        (out / "merges.txt").write_text(
            "#version: 0.2\n" + "".join(f"{m}\n" for m in merges), encoding="utf-8"
        )


def _by_id(item: tuple[str, int]) -> int:
    return item[1]


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def replace_dir(build: Callable[[Path], None], directory: str | Path) -> Path:
    """Call `build(tmp)` to fill a fresh sibling directory, then swap it in for `directory`,
    so a reader never sees half a tokenizer."""
    out = Path(directory)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.{uuid.uuid4().hex[:12]}.tmp"
    tmp.mkdir()  # not mkdtemp: its mode 0700 would hide the tokenizer from other users
    try:
        build(tmp)
        if out.exists():
            old = out.parent / f".{out.name}.{uuid.uuid4().hex[:12]}.old"
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


@dataclass
class TokenizerInfo:
    """A loaded tokenizer and the facts the shard builder and trainer need about it."""

    tokenizer: Tokenizer
    kind: str
    special: SpecialTokens
    special_ids: dict[str, int]
    sha256: str
    path: str
    all_special_ids: list[int] = field(default_factory=list)

    @property
    def vocab_size(self) -> int:
        return int(self.tokenizer.get_vocab_size(with_added_tokens=True))

    def word_start_table(self) -> list[bool]:
        """For every id: does this piece start a word? (whole-word masking reads this)"""
        return word_start_table(self.tokenizer, self.special)

    def tokens(self) -> list[str | None]:
        return token_strings(self.tokenizer)


def token_strings(tok: Tokenizer) -> list[str | None]:
    """Every id's token string, added tokens included (None for an id the vocabulary lacks)."""
    return [tok.id_to_token(i) for i in range(tok.get_vocab_size(with_added_tokens=True))]


def word_start_table(tok: Tokenizer, sp: SpecialTokens) -> list[bool]:
    """Per id, True when the piece begins a word: WordPiece pieces without `##`, BPE pieces
    with `Ġ`, Unigram pieces with `▁`; special and added tokens count as word starts.

    A word is what the vocabulary's own convention makes it: for BPE and Unigram a
    whitespace-delimited word (so "end." is one word, as in fairseq's whole-word masking),
    for WordPiece a BERT pre-token (punctuation is a word of its own). The first word of a
    text has no `Ġ` in byte-level BPE; the masker treats the piece after a special token
    as a word start, which covers it.
    """
    size = tok.get_vocab_size(with_added_tokens=True)
    table = [True] * size
    added = set(tok.get_added_tokens_decoder())
    for token, idx in tok.get_vocab(with_added_tokens=True).items():
        if idx in added or token in sp.order:
            continue
        if sp.continuation_prefix is not None:
            table[idx] = not token.startswith(sp.continuation_prefix)
        elif sp.word_start_prefix is not None:
            table[idx] = token.startswith(sp.word_start_prefix)
    return table


def tokenizer_kind(tok: Tokenizer) -> str:
    model_type = json.loads(tok.to_str())["model"]["type"]
    kind = {"WordPiece": "wordpiece", "BPE": "bpe", "Unigram": "unigram"}.get(model_type)
    if kind is None:
        raise BadInputError(f"tokenizer model {model_type!r} is not WordPiece, BPE or Unigram")
    return kind


def load_tokenizer(path: str | Path) -> TokenizerInfo:
    """Load a tokenizer directory (with tokenizer.json), a tokenizer.json file, or a plain
    BERT vocab.txt (alone or in a directory). Special tokens are found by the roles the
    directory's tokenizer_config.json / special_tokens_map.json names, else by our
    conventions. BadInputError naming the path if it is none of these or lacks one."""
    p = Path(path)
    if p.is_dir():
        if (p / TOKENIZER_FILE).is_file():
            p = p / TOKENIZER_FILE
        elif (p / "vocab.txt").is_file():
            p = p / "vocab.txt"
        else:
            raise BadInputError(f"{path}: no tokenizer.json or vocab.txt in this directory")
    if not p.is_file():
        raise BadInputError(f"{path}: no such tokenizer")
    declared = _declared_config(p.parent)
    data = read_bounded(p, MAX_TOKENIZER_BYTES, "tokenizer file")
    if p.name.endswith(".txt"):
        tok = _from_vocab_txt(p, data, declared.get("do_lower_case"))
        data = tok.to_str().encode("utf-8")
    else:
        try:
            tok = Tokenizer.from_str(data.decode("utf-8"))
        except Exception as err:  # tokenizers raises bare Exception subclasses on bad files
            raise BadInputError(f"{p}: not a tokenizer ({_first_line(err)})") from None
    try:
        # A file that loads can still fail on its first text (a WordPiece model whose
        # [UNK] is not in its vocabulary): found here, not in a worker mid-run.
        tok.encode(_PROBE)
    except Exception as err:  # tokenizers raises bare Exception on encoding failures
        raise BadInputError(f"{p}: cannot encode text ({_first_line(err)})") from None
    kind = tokenizer_kind(tok)
    sp = _conventions(tok, kind, declared)
    ids: dict[str, int] = {}
    for role, token in sp.roles().items():
        idx = tok.token_to_id(token)
        if idx is None:
            raise BadInputError(f"{p}: the {kind} special token {token} ({role}) is missing")
        ids[role] = idx
    added_special = {i for i, t in tok.get_added_tokens_decoder().items() if t.special}
    return TokenizerInfo(
        tokenizer=tok,
        kind=kind,
        special=sp,
        special_ids=ids,
        sha256=hashlib.sha256(data).hexdigest(),
        path=str(p),
        all_special_ids=sorted(set(ids.values()) | added_special),
    )


# Words in and out of any vocabulary, in a few scripts: what a tokenizer must encode.
_PROBE = "The probe, 한국어 テスト ☃ \u0000 qzxjv."


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _declared_config(directory: Path) -> dict[str, Any]:
    """tokenizer_config.json over special_tokens_map.json, token values as plain strings."""
    merged: dict[str, Any] = {}
    for name in (SPECIAL_MAP_FILE, CONFIG_FILE):
        f = directory / name
        if not f.is_file():
            continue
        try:
            data = loads(f.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise BadInputError(f"{f}: not valid JSON ({err})") from None
        if isinstance(data, dict):
            merged.update(data)
    for role in _ROLES:
        value = merged.get(f"{role}_token")
        if isinstance(value, dict):  # AddedToken form: {"content": "[CLS]", ...}
            merged[f"{role}_token"] = value.get("content")
    return merged


def _conventions(tok: Tokenizer, kind: str, declared: dict[str, Any]) -> SpecialTokens:
    """Our conventions for `kind`, with role tokens and word marks taken from the tokenizer
    itself where it says otherwise (an ALBERT directory's `[CLS]`, a BPE with `##`)."""
    base = special_tokens_for(kind)
    roles: dict[str, str] = {}
    for role in _ROLES:
        declared_token = declared.get(f"{role}_token")
        roles[role] = declared_token if isinstance(declared_token, str) else getattr(base, role)
    spec = json.loads(tok.to_str())
    continuation, word_start = base.continuation_prefix, base.word_start_prefix
    model = spec["model"]
    if kind == "wordpiece":
        continuation = model.get("continuing_subword_prefix") or "##"
    else:
        marks = _pre_tokenizer_types(spec.get("pre_tokenizer"))
        replacement = _metaspace_replacement(spec.get("pre_tokenizer"))
        if "ByteLevel" in marks:
            continuation, word_start = None, "\u0120"
        elif replacement is not None:
            continuation, word_start = None, replacement
        elif model.get("continuing_subword_prefix"):
            continuation, word_start = model["continuing_subword_prefix"], None
        else:  # no way to tell word starts per piece: every piece is its own word
            continuation, word_start = None, None
    order = tuple(dict.fromkeys(roles[r] for r in _ROLES))
    return SpecialTokens(
        pad=roles["pad"],
        unk=roles["unk"],
        cls=roles["cls"],
        sep=roles["sep"],
        mask=roles["mask"],
        order=order if roles != base.roles() else base.order,
        continuation_prefix=continuation,
        word_start_prefix=word_start,
    )


def _pre_tokenizer_types(spec: Any) -> set[str]:
    if not isinstance(spec, dict):
        return set()
    found = {str(spec.get("type"))}
    for inner in spec.get("pretokenizers", []) or []:
        found |= _pre_tokenizer_types(inner)
    return found


def _metaspace_replacement(spec: Any) -> str | None:
    if not isinstance(spec, dict):
        return None
    if spec.get("type") == "Metaspace":
        return str(spec.get("replacement", "\u2581"))
    for inner in spec.get("pretokenizers", []) or []:
        found = _metaspace_replacement(inner)
        if found is not None:
            return found
    return None


def _lowercases(tok: Tokenizer) -> bool:
    return tok.normalizer is not None and tok.normalizer.normalize_str("A") == "a"


def _from_vocab_txt(path: Path, data: bytes, do_lower_case: Any = None) -> Tokenizer:
    """A BERT tokenizer from a plain vocab.txt's bytes (`path` names it in errors), built as
    BertTokenizerFast builds it (line i is id i). Case follows a beside
    tokenizer_config.json's do_lower_case, else the vocabulary itself: no upper-case letter
    in it means an uncased model."""
    try:
        lines = data.decode("utf-8").removeprefix("\ufeff").split("\n")
    except UnicodeDecodeError as err:
        raise BadInputError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    vocab: dict[str, int] = {}
    for i, line in enumerate(lines):
        token = line.rstrip()
        if not token:
            raise BadInputError(f"{path}: line {i + 1} is empty (every line is one token)")
        if token in vocab:
            raise BadInputError(
                f"{path}: line {i + 1} repeats {token!r} from line {vocab[token] + 1}"
            )
        vocab[token] = i
    sp = special_tokens_for("wordpiece")
    missing = [t for t in sp.order if t not in vocab]
    if missing:
        raise BadInputError(f"{path}: vocab.txt lacks {', '.join(missing)}")
    if isinstance(do_lower_case, bool):
        lowercase = do_lower_case
    else:
        lowercase = not any(any(c.isupper() for c in t) for t in vocab if t not in sp.order)
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token=sp.unk, max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens(list(sp.order))
    add_post_processor(tok, "wordpiece", sp)
    return tok


def copy_tokenizer_dir(info: TokenizerInfo, directory: str | Path) -> None:
    """Write the tokenizer a shard set or a run keeps beside itself, as a complete HF
    directory whose tokenizer.json hashes to `info.sha256`."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    src = Path(info.path)
    if src.name != TOKENIZER_FILE:  # a plain vocab.txt: write the directory it implies
        write_tokenizer_dir(info.tokenizer, out, "wordpiece", sp=info.special)
        return
    for name in DIRECTORY_FILES:
        if (src.parent / name).is_file():
            shutil.copyfile(src.parent / name, out / name)
    if not (out / CONFIG_FILE).is_file():  # a bare tokenizer.json: say what it is
        write_tokenizer_dir(info.tokenizer, out, info.kind, sp=info.special)
        shutil.copyfile(src, out / TOKENIZER_FILE)


def copy_tokenizer_files(src: Path, dest: Path) -> list[str]:
    """Copy the tokenizer files of directory `src` (`DIRECTORY_FILES`, nothing else: a
    transformers directory also holds config.json and the weights) into `dest`; returns
    the names copied. A name `dest` already holds is a BadInputError, never replaced: a
    model directory gets its tokenizer beside what `save_pretrained` wrote."""
    dest.mkdir(parents=True, exist_ok=True)
    names = [name for name in DIRECTORY_FILES if (src / name).is_file()]
    for name in names:
        if (dest / name).exists():
            raise BadInputError(
                f"{dest / name}: written already, and the tokenizer {src} has a file of that "
                "name too; one would overwrite the other"
            )
    for name in names:
        shutil.copyfile(src / name, dest / name)
    return names


def parse_token_counts(data: bytes, vocab_size: int, where: str) -> list[int]:
    """The `counts` of a token_counts.json; BadInputError naming `where` if it is not one
    count per id of a `vocab_size` vocabulary."""
    try:
        counts = loads(data.decode("utf-8"))["counts"]
    except (ValueError, KeyError, TypeError) as err:
        raise BadInputError(f"{where}: not a token counts file ({err})") from None
    if (
        not isinstance(counts, list)
        or len(counts) != vocab_size
        or not all(isinstance(c, int) and c >= 0 for c in counts)
    ):
        raise BadInputError(f"{where}: expected {vocab_size} non-negative counts")
    return counts


def read_token_counts(tokenizer: str | Path, vocab_size: int) -> list[int] | None:
    """The counts beside a tokenizer (its directory or a file in it), None if it has none."""
    path = Path(tokenizer)
    path = (path if path.is_dir() else path.parent) / TOKEN_COUNTS_FILE
    if not path.is_file():
        return None
    return parse_token_counts(path.read_bytes(), vocab_size, str(path))
