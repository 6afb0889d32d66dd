"""Tokenizers: train WordPiece / byte-level BPE / Unigram with Hugging Face `tokenizers`,
save them as a directory `transformers.AutoTokenizer` loads, and load them back.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers import trainers as tk_trainers

from schemas.errors import BadInputError
from schemas.special_tokens import VOCAB_KINDS, SpecialTokens, special_tokens_for

TOKENIZER_FILE = "tokenizer.json"
# Paper defaults: BERT's uncased vocabulary has 30522 entries, RoBERTa's 50265, ALBERT's 30000.
DEFAULT_VOCAB_SIZE = {"wordpiece": 30522, "bpe": 50265, "unigram": 30000}
MODEL_MAX_LENGTH = 512


@dataclass(frozen=True)
class VocabConfig:
    kind: str = "wordpiece"
    vocab_size: int | None = None  # None: the paper default for `kind`
    min_frequency: int = 2
    limit_alphabet: int = 1000
    cased: bool = False
    extra_special_tokens: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in VOCAB_KINDS:
            raise ValueError(f"unknown vocabulary kind {self.kind!r}; use {', '.join(VOCAB_KINDS)}")

    @property
    def size(self) -> int:
        return self.vocab_size or DEFAULT_VOCAB_SIZE[self.kind]


def new_tokenizer(config: VocabConfig) -> tuple[Tokenizer, tk_trainers.Trainer]:
    """An untrained tokenizer and its trainer, set up the way BERT/RoBERTa/ALBERT did."""
    sp = special_tokens_for(config.kind)
    specials = list(sp.order) + list(config.extra_special_tokens)
    if config.kind == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token=sp.unk, max_input_chars_per_word=100))
        tok.normalizer = normalizers.BertNormalizer(
            clean_text=True,
            handle_chinese_chars=True,
            strip_accents=None,
            lowercase=not config.cased,
        )
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece(prefix="##")
        trainer: tk_trainers.Trainer = tk_trainers.WordPieceTrainer(
            vocab_size=config.size,
            min_frequency=config.min_frequency,
            limit_alphabet=config.limit_alphabet,
            special_tokens=specials,
            continuing_subword_prefix="##",
            show_progress=False,
        )
    elif config.kind == "bpe":
        tok = Tokenizer(models.BPE(unk_token=None))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = tk_trainers.BpeTrainer(
            vocab_size=config.size,
            min_frequency=config.min_frequency,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
    else:
        tok = Tokenizer(models.Unigram())
        steps: list[normalizers.Normalizer] = [normalizers.NFKC()]
        if not config.cased:
            steps.append(normalizers.Lowercase())
        tok.normalizer = normalizers.Sequence(steps)
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
        tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
        trainer = tk_trainers.UnigramTrainer(
            vocab_size=config.size,
            special_tokens=specials,
            unk_token=sp.unk,
            show_progress=False,
        )
    return tok, trainer


def _add_post_processor(tok: Tokenizer, kind: str) -> None:
    sp = special_tokens_for(kind)
    cls_id, sep_id = tok.token_to_id(sp.cls), tok.token_to_id(sp.sep)
    assert cls_id is not None and sep_id is not None, "special tokens are added before training"
    if kind == "bpe":
        tok.post_processor = processors.RobertaProcessing(
            (sp.sep, sep_id), (sp.cls, cls_id), trim_offsets=True, add_prefix_space=False
        )
        return
    tok.post_processor = processors.TemplateProcessing(
        single=f"{sp.cls} $A {sp.sep}",
        pair=f"{sp.cls} $A {sp.sep} $B:1 {sp.sep}:1",
        special_tokens=[(sp.cls, cls_id), (sp.sep, sep_id)],
    )


def train_tokenizer(texts: Iterable[str], config: VocabConfig) -> Tokenizer:
    """Train on `texts` (streamed once). BadInputError if they hold no usable text."""
    tok, trainer = new_tokenizer(config)
    counted = _CountingIterator(texts)
    tok.train_from_iterator(counted, trainer=trainer)
    sp = special_tokens_for(config.kind)
    if counted.chars == 0 or tok.get_vocab_size() <= len(sp.order) + len(
        config.extra_special_tokens
    ):
        raise BadInputError(
            "no text to train a vocabulary on: the input is empty or every document was filtered"
        )
    _add_post_processor(tok, config.kind)
    return tok


class _CountingIterator(Iterator[str]):
    def __init__(self, texts: Iterable[str]) -> None:
        self._it = iter(texts)
        self.docs = 0
        self.chars = 0

    def __next__(self) -> str:
        text = next(self._it)
        self.docs += 1
        self.chars += len(text.strip())
        return text


def save_tokenizer(tok: Tokenizer, config: VocabConfig, directory: str | Path) -> Path:
    """Write the HF tokenizer directory atomically (a temp dir renamed into place)."""
    out = Path(directory)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        _write_tokenizer_files(tok, config, tmp)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _write_tokenizer_files(tok: Tokenizer, config: VocabConfig, out: Path) -> None:
    sp = special_tokens_for(config.kind)
    tok.save(str(out / TOKENIZER_FILE), pretty=False)
    cls_name = {
        "wordpiece": "BertTokenizer",
        "bpe": "RobertaTokenizer",
        "unigram": "PreTrainedTokenizerFast",
    }[config.kind]
    special_map = {
        "pad_token": sp.pad,
        "unk_token": sp.unk,
        "cls_token": sp.cls,
        "sep_token": sp.sep,
        "mask_token": sp.mask,
    }
    if config.kind != "wordpiece":
        special_map.update(bos_token=sp.cls, eos_token=sp.sep)
    if config.extra_special_tokens:
        special_map["additional_special_tokens"] = list(config.extra_special_tokens)  # type: ignore[assignment]
    tok_config: dict[str, object] = {
        "tokenizer_class": cls_name,
        "model_max_length": MODEL_MAX_LENGTH,
        "clean_up_tokenization_spaces": False,
        "clozeworks_kind": config.kind,
        **special_map,
    }
    if config.kind == "wordpiece":
        tok_config.update(do_lower_case=not config.cased, strip_accents=None)
    if config.kind == "bpe":
        tok_config.update(add_prefix_space=False, trim_offsets=True)
    _write_json(out / "tokenizer_config.json", tok_config)
    _write_json(out / "special_tokens_map.json", special_map)
    vocab = tok.get_vocab()
    if config.kind == "wordpiece":
        ordered = sorted(vocab.items(), key=lambda kv: kv[1])
        (out / "vocab.txt").write_text("".join(f"{t}\n" for t, _ in ordered), encoding="utf-8")
    elif config.kind == "bpe":
        model = json.loads(tok.to_str())["model"]
        _write_json(out / "vocab.json", model["vocab"])
        merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
        (out / "merges.txt").write_text(
            "#version: 0.2\n" + "".join(f"{m}\n" for m in merges), encoding="utf-8"
        )


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


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


def word_start_table(tok: Tokenizer, sp: SpecialTokens) -> list[bool]:
    """Per id, True when the piece begins a word: WordPiece pieces without `##`, BPE pieces
    with `Ġ`, Unigram pieces with `▁`. Special tokens count as word starts."""
    size = tok.get_vocab_size(with_added_tokens=True)
    table = [True] * size
    for token, idx in tok.get_vocab(with_added_tokens=True).items():
        if token in sp.order:
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
    BERT vocab.txt. BadInputError naming the path if it is none of these or lacks the
    special tokens its kind needs."""
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
    data = p.read_bytes()
    try:
        tok = _from_vocab_txt(p) if p.name.endswith(".txt") else Tokenizer.from_str(data.decode())
    except Exception as err:  # tokenizers raises bare Exception subclasses on bad files
        raise BadInputError(f"{p}: not a tokenizer ({err})") from None
    kind = tokenizer_kind(tok)
    sp = special_tokens_for(kind)
    ids: dict[str, int] = {}
    for role, token in sp.roles().items():
        idx = tok.token_to_id(token)
        if idx is None:
            raise BadInputError(f"{p}: the {kind} special token {token} ({role}) is missing")
        ids[role] = idx
    all_special = sorted(set(ids.values()) | _added_special_ids(tok))
    if p.name.endswith(".txt"):
        data = tok.to_str().encode()
    return TokenizerInfo(
        tokenizer=tok,
        kind=kind,
        special=sp,
        special_ids=ids,
        sha256=hashlib.sha256(data).hexdigest(),
        path=str(p),
        all_special_ids=all_special,
    )


def _added_special_ids(tok: Tokenizer) -> set[int]:
    return {idx for idx, added in tok.get_added_tokens_decoder().items() if added.special}


def _from_vocab_txt(path: Path) -> Tokenizer:
    """A BERT tokenizer from a plain vocab.txt, configured as BertTokenizerFast would be."""
    vocab: dict[str, int] = {}
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        token = line.rstrip("\n")
        if token and token not in vocab:
            vocab[token] = i
    sp = special_tokens_for("wordpiece")
    missing = [t for t in sp.order if t not in vocab]
    if missing:
        raise BadInputError(f"{path}: vocab.txt lacks {', '.join(missing)}")
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token=sp.unk))
    lowercase = not any(t[:1].isupper() for t in vocab if not t.startswith("["))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens(list(sp.order))
    _add_post_processor(tok, "wordpiece")
    return tok


def copy_tokenizer_dir(info: TokenizerInfo, directory: str | Path) -> None:
    """Copy the tokenizer files a shard set or a run keeps beside itself."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    src = Path(info.path)
    if src.name == TOKENIZER_FILE:
        for f in src.parent.iterdir():
            if f.is_file() and (f.suffix in (".json", ".txt")):
                shutil.copyfile(f, out / f.name)
    else:
        info.tokenizer.save(str(out / TOKENIZER_FILE), pretty=False)
        shutil.copyfile(src, out / "vocab.txt")


def train_tokenizer_from_files(files: Iterable[str], config: VocabConfig) -> Tokenizer:
    """As `train_tokenizer`, streaming text files (one training sequence per line) in Rust."""
    paths = sorted(files)
    chars = sum(os.path.getsize(p) for p in paths)
    if chars == 0:
        raise BadInputError(
            "no text to train a vocabulary on: the input is empty or every document was filtered"
        )
    tok, trainer = new_tokenizer(config)
    tok.train(paths, trainer=trainer)
    _add_post_processor(tok, config.kind)
    return tok


def sample_score(seed: int, doc_id: str) -> float:
    """A document's place in the deterministic sample: uniform in [0, 1) from (seed, id)."""
    digest = hashlib.blake2b(f"{seed}\x00{doc_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64
