"""Tokenizers: train WordPiece (BERT), byte-level BPE (RoBERTa) or Unigram (ALBERT) with
Hugging Face `tokenizers`, deterministically: the same texts give a byte-identical
`tokenizer.json` whatever their order and on every run.

`tokenizers` alone does not promise that. Its WordPiece trainer numbers `##c` pieces in
hash-map order and breaks ties between equal merges by those numbers (see
`corpus.vocab.alphabet`); its Unigram trainer sums in hash-map order, so scores differ in the
last bits, and gives characters it had to re-add penalty scores in hash-set order. We fix the
first by choosing the alphabet ourselves, the second by `canonical_unigram`. Byte-level BPE
is deterministic as it is.

The directory format (save, load, copy) lives in `corpus.vocab.files` and is re-exported.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import trainers as tk_trainers

from clozeworks.corpus.vocab import jamo
from clozeworks.corpus.vocab.alphabet import AlphabetPlan, plan_alphabet
from clozeworks.corpus.vocab.alphabet import char_counts as count_chars
from clozeworks.corpus.vocab.files import (
    DIRECTORY_FILES,
    MODEL_MAX_LENGTH,
    TOKENIZER_FILE,
    VOCAB_STATS_FILE,
    TokenizerInfo,
    add_post_processor,
    copy_tokenizer_dir,
    load_tokenizer,
    replace_dir,
    tokenizer_kind,
    word_start_table,
    write_tokenizer_dir,
)
from clozeworks.corpus.vocab.morphemes import MARK, Analyzer, PreTokenize, mark, require_analyzer
from clozeworks.corpus.vocab.sample import sample_score
from clozeworks.schemas.errors import BadInputError, SettingError, UsageError
from clozeworks.schemas.kinds import BpeLevel, Hangul
from clozeworks.schemas.settings import check_at_least, check_choices, setting
from clozeworks.schemas.special_tokens import VocabKind, special_tokens_for

__all__ = [
    "DEFAULT_CASED",
    "DEFAULT_VOCAB_SIZE",
    "DIRECTORY_FILES",
    "MODEL_MAX_LENGTH",
    "NO_TEXT",
    "TOKENIZER_FILE",
    "VOCAB_STATS_FILE",
    "TokenizerInfo",
    "VocabConfig",
    "canonical_unigram",
    "copy_tokenizer_dir",
    "load_tokenizer",
    "new_tokenizer",
    "sample_score",
    "save_tokenizer",
    "tokenizer_kind",
    "train_tokenizer",
    "train_tokenizer_from_files",
    "word_start_table",
]

# Paper defaults: BERT's uncased vocabulary has 30522 entries, RoBERTa's 50265, ALBERT's 30000.
DEFAULT_VOCAB_SIZE = {"wordpiece": 30522, "bpe": 50265, "unigram": 30000}
# BERT's and ALBERT's published vocabularies are lowercased; RoBERTa's byte-level BPE is not.
DEFAULT_CASED = {"wordpiece": False, "bpe": True, "unigram": False}
# Unigram scores are rounded to this many decimals. The trainer's scores differ between runs
# by up to ~4e-11 (hash-order summation); 1e-4 in log-probability is far below what changes
# a segmentation, and makes a run whose rounding differs improbable (~1e-4 at 16k pieces).
UNIGRAM_SCORE_DECIMALS = 4
# tokenizers' Unigram trainer scores characters it must re-add as min_score + k * 1e-4.
_UNIGRAM_PENALTY_STEP = 1e-4
NO_TEXT = "no text to train a vocabulary on: the input is empty or every document was filtered"


SENTINEL = "<extra_id_{}>"


def _tokens(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t)


@dataclass(frozen=True)
class VocabConfig:
    kind: VocabKind = setting(
        "wordpiece",
        "wordpiece: BERT; bpe: RoBERTa byte-level BPE; unigram: ALBERT/SentencePiece",
    )
    # None: the paper's size for `kind` (DEFAULT_VOCAB_SIZE).
    vocab_size: int | None = setting(
        None,
        "default: " + ", ".join(f"{n} {k}" for k, n in DEFAULT_VOCAB_SIZE.items()),
        metavar="N",
    )
    min_frequency: int = setting(2, "wordpiece, bpe: make no merge seen fewer times", metavar="N")
    limit_alphabet: int | None = setting(
        1000, "wordpiece: keep the N most frequent characters", metavar="N"
    )
    # None: as the paper (BERT, ALBERT lowercase; RoBERTa does not).
    cased: bool | None = setting(
        None,
        "keep case; --no-cased lowercases (wordpiece: and strips Latin, Greek and Cyrillic "
        "accents, other scripts kept whole) (default: as the paper)",
    )
    extra_special_tokens: tuple[str, ...] = setting(
        (),
        "extra special tokens, comma-separated (ids after the five standard ones)",
        flag="special-tokens",
        metavar="T1,T2",
        parse=_tokens,
    )
    # T5's sentinels <extra_id_0> ... <extra_id_{N-1}>, added after training as the last
    # ids, <extra_id_0> the very last (T5's 100 on top of its 32,000 pieces).
    sentinels: int = setting(
        0,
        "add T5's sentinels <extra_id_0>..<extra_id_N-1> as the last N ids, which span "
        "corruption (--objective t5) needs; T5 used 100",
        metavar="N",
    )

    bpe_level: BpeLevel = setting(
        "byte",
        "bpe: byte (RoBERTa's byte-level BPE) or char (SentencePiece's BPE over characters, "
        "`▁` before each word, as KoGPT2 and KoBART: an unseen character is <unk>)",
    )
    # KLUE cut its Korean corpus into morphemes before training; the tokenizer it
    # released reads raw text (corpus/vocab/morphemes.py).
    pre_tokenize: PreTokenize = setting(
        "words",
        "morphemes: train on Korean cut at its morphemes by --analyzer, so pieces follow "
        "morpheme boundaries (KLUE's recipe); the tokenizer still reads raw text with no "
        "analyzer installed; words: the kind's own pre-tokenizer alone",
    )
    hangul: Hangul = setting(
        "syllables",
        "jamo: learn the vocabulary over Hangul decomposed into conjoining jamo (KR-BERT's "
        "sub-characters): the tokenizer decomposes each syllable and decodes back to whole "
        "syllables; syllables: Hangul as written",
    )
    analyzer: Analyzer = setting(
        "mecab",
        "the morphological analyzer of --pre-tokenize morphemes: mecab (MeCab-ko, KLUE's; "
        "the [mecab] extra) or kiwi (the [kiwi] extra)",
    )

    def __post_init__(self) -> None:
        check_at_least("sentinels", self.sentinels, 0)
        check_choices(self)
        if self.pre_tokenize == "morphemes":
            require_analyzer(self.analyzer)
        specials = special_tokens_for(self.kind).order
        floor = len(specials) + len(self.extra_special_tokens) + 1
        if self.vocab_size is not None and self.vocab_size < floor:
            raise SettingError("vocab_size", f"must be at least {floor} (got {self.vocab_size})")
        check_at_least("min_frequency", self.min_frequency, 0)
        if self.limit_alphabet is not None:
            check_at_least("limit_alphabet", self.limit_alphabet, 1)
        for token in self.extra_special_tokens:
            if not token or token != token.strip():
                raise UsageError(f"special token {token!r} is empty or has surrounding spaces")
            if token in specials:
                raise UsageError(f"{token} is already a {self.kind} special token")
        if len(set(self.extra_special_tokens)) != len(self.extra_special_tokens):
            raise SettingError("extra_special_tokens", "lists a token twice")

    @property
    def size(self) -> int:
        return self.vocab_size or DEFAULT_VOCAB_SIZE[self.kind]

    @property
    def lowercase(self) -> bool:
        return not (DEFAULT_CASED[self.kind] if self.cased is None else self.cased)

    @property
    def special_tokens(self) -> list[str]:
        """In id order: the kind's five, then the extra ones."""
        return list(special_tokens_for(self.kind).order) + list(self.extra_special_tokens)

    @property
    def sentinel_tokens(self) -> list[str]:
        """<extra_id_0>, <extra_id_1>, ... (their ids count down from the last)."""
        return [SENTINEL.format(i) for i in range(self.sentinels)]


# Scripts whose accents BERT's uncased models strip (the marks a letter carries in NFD).
ACCENTED_SCRIPTS = ("Latin", "Greek", "Cyrillic")


def wordpiece_normalizer(lowercase: bool) -> normalizers.Normalizer:
    """BERT's normalizer (control characters removed, spaces around CJK ideographs), and
    uncased: lowercase, accents stripped from Latin, Greek and Cyrillic letters only, NFC.

    BERT's own uncased step decomposes to NFD, drops every combining mark and never
    recomposes: Hangul syllables come out as conjoining jamo (mBERT-uncased's known Korean
    defect), kana lose their dakuten (が -> か), Devanagari its virama, Hebrew its points.
    Here marks go only after a letter of the scripts BERT meant, and NFC puts the rest back
    together, so every other script leaves the normalizer as it came in (in NFC)."""
    if not lowercase:  # strip_accents None: follow lowercase, as BERT's cased models do
        return normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=False
        )
    bert = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=True
    )
    letters = "".join(rf"\p{{{script}}}" for script in ACCENTED_SCRIPTS)
    return normalizers.Sequence([
        bert,
        normalizers.NFD(),
        normalizers.Replace(Regex(rf"(?<=[{letters}])\p{{Mn}}+"), ""),
        normalizers.NFC(),
    ])  # fmt: skip


def sentencepiece_normalizer(lowercase: bool) -> normalizers.Normalizer:
    """As SentencePiece's nmt_nfkc: NFKC, and any run of whitespace (line breaks, tabs) is
    one space, none at the ends, so every word starts with "▁"."""
    steps: list[normalizers.Normalizer] = [
        normalizers.NFKC(),
        normalizers.Replace(Regex(r"\s+"), " "),
        normalizers.Strip(),
    ]
    if lowercase:
        steps.append(normalizers.Lowercase())
    return normalizers.Sequence(steps)


def untrained_tokenizer(config: VocabConfig) -> Tokenizer:
    """The normalizer, pre-tokenizer and decoder BERT / RoBERTa / ALBERT use, no vocabulary."""
    sp = special_tokens_for(config.kind)
    if config.kind == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token=sp.unk, max_input_chars_per_word=100))
        tok.normalizer = wordpiece_normalizer(config.lowercase)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece(prefix="##")
    elif config.kind == "bpe" and config.bpe_level == "char":
        tok = Tokenizer(models.BPE(unk_token=sp.unk))
        tok.normalizer = sentencepiece_normalizer(config.lowercase)
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
        tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    elif config.kind == "bpe":
        tok = Tokenizer(models.BPE(unk_token=None))
        if config.lowercase:
            tok.normalizer = normalizers.Lowercase()
        # RoBERTa: no space is added before the first word.
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
    else:
        tok = Tokenizer(models.Unigram())
        tok.normalizer = sentencepiece_normalizer(config.lowercase)
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
        tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    if config.hangul == "jamo":
        kept = [tok.normalizer] if tok.normalizer is not None else []
        tok.normalizer = normalizers.Sequence([*kept, *jamo.decomposing()])
        tok.decoder = decoders.Sequence([tok.decoder, *jamo.composing()])
    return tok


def training_pre_tokenizer(config: VocabConfig, standard: Any) -> Any:
    """The pre-tokenizer the trainer sees: the kind's own, and with morphemes one that
    also cuts at MARK (kept at the head of a WordPiece continuation, removed otherwise)."""
    if config.pre_tokenize != "morphemes" or config.kind == "unigram":
        # Unigram keeps the mark inside its words (`unigram_from_marks` says why).
        return standard
    if config.kind == "wordpiece":
        cut = pre_tokenizers.Split(MARK, behavior="merged_with_next")
        return pre_tokenizers.Sequence([standard, cut])
    cut = pre_tokenizers.Split(MARK, behavior="removed")
    # Byte-level BPE: cut before the bytes are mapped (the mark is four of them).
    byte_level = config.kind == "bpe" and config.bpe_level == "byte"
    steps = [cut, standard] if byte_level else [standard, cut]
    return pre_tokenizers.Sequence(steps)


def from_marks(vocab: Mapping[str, int], size: int | None = None) -> dict[str, int]:
    """A WordPiece vocabulary trained on marked morphemes as BERT's: a piece that starts
    with MARK is that morpheme as a continuation (`##었`); the mark alone goes, a piece
    spelled twice keeps its first id, and ids close up in order, up to `size` (the last
    merges go first)."""
    out: dict[str, int] = {}
    for token, _ in sorted(vocab.items(), key=lambda kv: kv[1]):
        name = "##" + token[1:] if token.startswith(MARK) else token
        if MARK in name or name == "##" or name in out:
            continue
        if size is not None and len(out) >= size:
            break
        out[name] = len(out)
    return out


def unigram_from_marks(
    vocab: Sequence[Sequence[Any]], n_special: int, size: int | None = None
) -> list[list[Any]]:
    """A Unigram vocabulary trained on words with MARK at their morpheme boundaries, as one
    over raw text whose pieces stay inside morphemes.

    A Unigram trainer seeds its pieces only from substrings repeated across distinct
    words: trained on morphemes as words, a morpheme found inside no other is never a piece
    (1,656 of 3,000 pieces asked, 3.66 tokens per eojeol against 1.76, on Debian's Korean
    man pages). So it trains on whole words with the marks in them, and a piece is then
    taken apart at its marks: each part is a piece (`◆습니다◆.` gives `습니다` and `.`),
    at least as likely as the whole was, and a part spelled by several pieces is one, their
    probabilities summed. Past `size`, the least likely pieces of two or more characters
    go (every character stays a piece)."""
    specials = [list(p) for p in vocab[:n_special]]
    merged: dict[str, float] = {}
    for piece, score in vocab[n_special:]:
        for name in str(piece).split(MARK):
            if name:
                old = merged.get(name)
                merged[name] = score if old is None else float(np.logaddexp(old, score))
    pieces = list(merged.items())
    room = None if size is None else size - len(specials)
    if room is not None and len(pieces) > room:
        chars = [p for p in pieces if len(p[0]) == 1]
        longer = sorted((p for p in pieces if len(p[0]) > 1), key=_by_score_then_text)
        pieces = chars + longer[: max(room - len(chars), 0)]
    return specials + [[p, s] for p, s in pieces]


def new_trainer(
    config: VocabConfig, alphabet: AlphabetPlan | None = None, show_progress: bool = False
) -> tk_trainers.Trainer:
    """The trainer for `config`. WordPiece needs the `alphabet` plan to be deterministic."""
    specials = config.special_tokens
    if config.kind == "wordpiece":
        if alphabet is None:
            raise ValueError("WordPiece training needs an AlphabetPlan (see plan_alphabet)")
        # The `##c` pieces go in as "special tokens" only so that their ids are fixed here;
        # finish_training makes them ordinary vocabulary entries again.
        return tk_trainers.WordPieceTrainer(
            vocab_size=config.size,
            min_frequency=config.min_frequency,
            limit_alphabet=max(1, len(alphabet.alphabet)),
            initial_alphabet=list(alphabet.alphabet),
            special_tokens=specials + list(alphabet.continuations),
            continuing_subword_prefix="##",
            show_progress=show_progress,
        )
    if config.kind == "bpe" and config.bpe_level == "char":
        return tk_trainers.BpeTrainer(
            vocab_size=config.size,
            min_frequency=config.min_frequency,
            special_tokens=specials,
            show_progress=show_progress,
        )
    if config.kind == "bpe":
        return tk_trainers.BpeTrainer(
            vocab_size=config.size,
            min_frequency=config.min_frequency,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=show_progress,
        )
    return tk_trainers.UnigramTrainer(
        vocab_size=config.size,
        special_tokens=specials,
        unk_token=special_tokens_for(config.kind).unk,
        show_progress=show_progress,
    )


def new_tokenizer(
    config: VocabConfig, alphabet: AlphabetPlan | None = None
) -> tuple[Tokenizer, tk_trainers.Trainer]:
    """An untrained tokenizer and its trainer, set up the way BERT/RoBERTa/ALBERT did."""
    return untrained_tokenizer(config), new_trainer(config, alphabet)


def train_tokenizer(
    texts: Iterable[str] | Iterable[list[str]],
    config: VocabConfig,
    char_counts: Mapping[str, int] | None = None,
    show_progress: bool = False,
    length: int | None = None,
    marked: bool = False,
) -> Tokenizer:
    """Train on `texts`, strings or lists of strings, streamed once (with
    `--pre-tokenize morphemes`, cut at their morphemes here unless `marked` says the
    analyzer already did: the vocab pipeline marks its sample on the workers).

    WordPiece needs the character counts of the texts first: pass `char_counts` (from
    `corpus.vocab.alphabet.char_counts`, or a Beam combine), or texts in a list so they can
    be counted here. BadInputError if the texts hold nothing but whitespace.
    """
    tok = untrained_tokenizer(config)
    if config.pre_tokenize == "morphemes" and not marked:
        texts = _marked(texts, config.analyzer)
    plan = None
    if config.kind == "wordpiece":
        if char_counts is None:
            if not isinstance(texts, Sequence):
                raise ValueError("WordPiece from a one-pass stream needs its char_counts")
            char_counts = count_chars(_flat(texts))
        if config.pre_tokenize == "morphemes":  # the mark must be in the alphabet
            char_counts = {**char_counts, MARK: max(char_counts.values(), default=0) + 1}
        plan = plan_alphabet(char_counts, tok, config.limit_alphabet)
        if not plan.alphabet:
            raise BadInputError(NO_TEXT)
    # tokenizers' own bars (indicatif) print blank lines where stderr is no terminal;
    # there the pipeline's plain progress lines say how the run goes.
    bars = show_progress and sys.stderr.isatty()
    out = _train_once(texts, config, plan, config.size, bars, length)
    # Renaming marked pieces leaves fewer (WordPiece: `##었` learned twice is one piece;
    # Unigram: pieces across a boundary go): texts that can be read again are trained again
    # on proportionally more, and cut back to the size asked.
    target, before = config.size, 0
    for _ in range(_REFILLS):
        got = out.get_vocab_size(with_added_tokens=False)
        if got >= config.size or got <= before or not _collides(config):
            break  # full, or the text holds no more pieces
        if isinstance(texts, Iterator):
            break
        before, target = got, math.ceil(target * config.size / max(got, 1) * _MARGIN)
        trained = _train_once(texts, config, plan, target, bars, length)
        out = trained if trained.get_vocab_size(with_added_tokens=False) > got else out
    return out


# Rounds of retraining to fill a morpheme vocabulary to its size, each on this much more
# than the last round's yield says is needed (what is over is cut back).
_REFILLS = 3
_MARGIN = 1.1


def _collides(config: VocabConfig) -> bool:
    return config.kind in ("wordpiece", "unigram") and config.pre_tokenize == "morphemes"


def _train_once(
    texts: Iterable[Any],
    config: VocabConfig,
    plan: AlphabetPlan | None,
    size: int,
    bars: bool,
    length: int | None,
) -> Tokenizer:
    tok = untrained_tokenizer(config)
    trainer = new_trainer(replace(config, vocab_size=size), plan, bars)
    seen = _SeesText(texts)
    tok.pre_tokenizer = training_pre_tokenizer(config, tok.pre_tokenizer)
    tok.train_from_iterator(seen, trainer=trainer, length=length)
    if not seen.found:
        raise BadInputError(NO_TEXT)
    return finish_training(tok, config, plan)


def train_tokenizer_from_files(
    files: Iterable[str], config: VocabConfig, char_counts: Mapping[str, int] | None = None
) -> Tokenizer:
    """As `train_tokenizer`, but `tokenizers` reads the local text files itself (one
    training sequence per line)."""
    paths = sorted(files)
    if not any(_file_has_text(p) for p in paths):
        raise BadInputError(NO_TEXT)
    if config.pre_tokenize == "morphemes":
        raise UsageError("--pre-tokenize morphemes trains from texts, not from files")
    tok = untrained_tokenizer(config)
    plan = None
    if config.kind == "wordpiece":
        if char_counts is None:
            char_counts = count_chars(_lines(paths))
        plan = plan_alphabet(char_counts, tok, config.limit_alphabet)
    tok.train(paths, trainer=new_trainer(config, plan))
    return finish_training(tok, config, plan)


def _file_has_text(path: str) -> bool:
    with open(path, encoding="utf-8", errors="replace") as f:
        return any(not line.isspace() for line in f)


def _lines(paths: Iterable[str]) -> Iterator[str]:
    for path in paths:
        with open(path, encoding="utf-8") as f:
            yield from f


def _marked(texts: Iterable[Any], analyzer: str) -> Iterable[Any]:
    """Each text (or batch of texts) with MARK at its morpheme boundaries; a list stays a
    list, so WordPiece can still count its characters."""
    one = (
        (mark(t, analyzer) if isinstance(t, str) else [mark(x, analyzer) for x in t]) for t in texts
    )
    return list(one) if isinstance(texts, Sequence) else one


def _flat(texts: Iterable[str] | Iterable[list[str]]) -> Iterator[str]:
    for item in texts:
        if isinstance(item, str):
            yield item
        else:
            yield from item


class _SeesText(Iterator[Any]):
    """Passes items through and notes whether any holds a non-whitespace character."""

    def __init__(self, texts: Iterable[Any]) -> None:
        self._it = iter(texts)
        self.found = False

    def __next__(self) -> Any:
        item = next(self._it)
        if not self.found:
            batch = [item] if isinstance(item, str) else item
            self.found = any(text and not text.isspace() for text in batch)
        return item


def finish_training(tok: Tokenizer, config: VocabConfig, plan: AlphabetPlan | None) -> Tokenizer:
    """The trained tokenizer in canonical form, with its post-processor. Checks that the
    special tokens got ids 0, 1, 2, ... in their order."""
    out = tok
    morphemes = config.pre_tokenize == "morphemes"
    # Byte-level BPE comes out of the trainer canonical already.
    if config.kind != "bpe" or morphemes:
        spec = json.loads(tok.to_str())
        if morphemes:  # the tokenizer reads raw text: the kind's own pre-tokenizer
            standard = untrained_tokenizer(config).to_str()
            spec["pre_tokenizer"] = json.loads(standard)["pre_tokenizer"]
            if config.kind == "wordpiece":
                spec["model"]["vocab"] = from_marks(spec["model"]["vocab"], config.size)
            if config.kind == "unigram":
                n = len(config.special_tokens)
                spec["model"]["vocab"] = unigram_from_marks(spec["model"]["vocab"], n, config.size)
        if plan is not None and plan.continuations:
            helpers = set(plan.continuations)
            spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] not in helpers]
        if config.kind == "unigram":
            spec["model"] = canonical_unigram(spec["model"], len(config.special_tokens))
        out = Tokenizer.from_str(json.dumps(spec, ensure_ascii=False))
    for i, token in enumerate(config.special_tokens):
        if out.token_to_id(token) != i:
            raise AssertionError(f"special token {token} has id {out.token_to_id(token)}, not {i}")
    if config.sentinels:
        added = [AddedToken(t, special=True) for t in reversed(config.sentinel_tokens)]
        out.add_special_tokens(added)
    add_post_processor(out, config.kind, special_tokens_for(config.kind))
    return out


def canonical_unigram(model: dict[str, Any], n_special: int) -> dict[str, Any]:
    """A Unigram model's `vocab` made independent of hash order: the characters the trainer
    re-added with penalty scores get those scores by code point, every score is rounded to
    UNIGRAM_SCORE_DECIMALS, and pieces are ordered by score, then by text.

    A piece spelled like a special token (text that contains "</s>" teaches the trainer
    that piece too) is dropped: two entries for one string would give the special token
    the learned piece's id."""
    specials = [list(p) for p in model["vocab"][:n_special]]
    names = {str(p) for p, _ in specials}
    pieces = [(str(p), float(s)) for p, s in model["vocab"][n_special:] if str(p) not in names]
    if not pieces:
        return model
    floor = min(s for _, s in pieces)
    penalized = sorted(
        (p for p, s in pieces if len(p) == 1 and _on_penalty_grid(s - floor)), key=ord
    )
    rescored = dict(pieces)
    for k, p in enumerate(penalized):
        rescored[p] = floor + k * _UNIGRAM_PENALTY_STEP
    ordered = sorted(
        ((p, round(s, UNIGRAM_SCORE_DECIMALS)) for p, s in rescored.items()),
        key=_by_score_then_text,
    )
    return {**model, "vocab": specials + [[p, s] for p, s in ordered]}


def _on_penalty_grid(offset: float) -> bool:
    steps = offset / _UNIGRAM_PENALTY_STEP
    return offset > -1e-9 and math.isclose(steps, round(steps), abs_tol=1e-5)


def _by_score_then_text(item: tuple[str, float]) -> tuple[float, str]:
    return -item[1], item[0]


def save_tokenizer(tok: Tokenizer, config: VocabConfig, directory: str | Path) -> Path:
    """Write the HF tokenizer directory atomically (a temp dir swapped into place)."""

    def build(tmp: Path) -> None:
        extra = (*config.extra_special_tokens, *config.sentinel_tokens)
        write_tokenizer_dir(tok, tmp, config.kind, extra)

    return replace_dir(build, directory)
