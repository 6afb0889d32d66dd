"""Whole-word, span and n-gram masking in Chinese, Japanese and Korean (issue 36, item 4):
words are the language's words. Chinese and Japanese words come from their segmenter,
found again from the ids for every vocabulary kind; Korean words are space-separated and
come from the vocabulary's own marks."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
import torch

from clozeworks.corpus.shards.counter_rng import sequence_keys
from clozeworks.corpus.shards.masking import MaskTables, mask_tokens, pad_batch
from clozeworks.corpus.shards.words import SegmentedWords, segmented_words
from clozeworks.corpus.text.filters import segmenters
from clozeworks.corpus.text.filters.languages import segmenter_name
from clozeworks.corpus.vocab.train import VocabConfig, train_tokenizer, word_start_table
from clozeworks.schemas.errors import UsageError
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.schemas.special_tokens import special_tokens_for
from tests.corpus.text.test_languages import ENGLISH_DOC, JAPANESE, KOREAN

pytest.importorskip("jieba")
pytest.importorskip("fugashi")

# Written for the test: Chinese prose, no spaces.
CHINESE = "\n".join(
    [
        "语言模型通过阅读大量文档来学习预测下一个词。",
        "中文文本的词语之间没有空格，所以需要分词工具来找到词的边界。",
        "我们喜欢自然语言处理，也喜欢机器学习和深度学习。",
        "今天天气很好，我们一起去公园散步，然后去图书馆看书。",
        "研究人员在北京大学和清华大学的实验室里训练了新的模型。",
    ]
)
JAPANESE_MORE = "\n".join(
    [
        JAPANESE,
        "東京の図書館には古い本と新しい雑誌が並んでいます。",
        "学生たちは週末ごとにそこに集まって一緒に勉強します。",
        "春になると公園には花が咲き、人々は散歩を楽しみます。",
    ]
)
TEXTS = {"zh": CHINESE, "ja": JAPANESE_MORE, "ko": KOREAN}
KINDS = ("wordpiece", "bpe", "unigram")
SPECIAL = 5  # ids 0-4 are the five roles in every kind


def _tokenizer(kind: str, language: str):
    config = VocabConfig(kind=kind, vocab_size=600, min_frequency=1)
    lines = [*TEXTS[language].splitlines(), ENGLISH_DOC]
    return train_tokenizer(lines * 3, config)


def _words(tok, kind: str, language: str) -> SegmentedWords:
    tokens = [tok.id_to_token(i) for i in range(tok.get_vocab_size())]
    words = segmented_words(language, tokens, special_tokens_for(kind))
    assert words is not None
    return words


def _expected_starts(text: str, offsets: list[tuple[int, int]], language: str) -> list[bool]:
    """A piece starts a word when a segmenter word of the original text starts at its
    first character and no earlier piece reaches into that character (byte-level BPE
    splits characters between pieces; Unigram's lone `▁` covers the next one)."""
    name = segmenter_name(language)
    assert name is not None
    starts, at = set(), 0
    for word in segmenters.segmenter(name)(text):
        found = text.find(word, at)
        starts.add(found)
        at = found + len(word)
    out, reached = [], 0
    for lo, hi in offsets:
        out.append(lo in starts and lo >= reached)
        reached = max(reached, hi)
    return out


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("language", ["zh", "ja"])
def test_pieces_start_where_the_segmenter_words_start(kind: str, language: str) -> None:
    tok = _tokenizer(kind, language)
    words = _words(tok, kind, language)
    table = word_start_table(tok, special_tokens_for(kind))
    not_the_vocabularys = 0
    for line in TEXTS[language].splitlines():
        enc = tok.encode(line, add_special_tokens=False)
        ids = np.asarray([enc.ids])
        got = words.starts(ids, np.ones_like(ids, dtype=bool))[0].tolist()
        want = _expected_starts(line, enc.offsets, language)
        assert got == want, list(zip(enc.tokens, got, want, strict=True))
        not_the_vocabularys += sum(g != table[i] for g, i in zip(got[1:], enc.ids[1:], strict=True))
    # The vocabulary alone makes every Han character, or a whole line, one word.
    assert not_the_vocabularys > 0


def test_english_inside_chinese_keeps_its_words() -> None:
    """Latin words amid Chinese start where the vocabulary says (no `##`), once each."""
    tok = _tokenizer("wordpiece", "zh")
    table = word_start_table(tok, special_tokens_for("wordpiece"))
    enc = tok.encode("我们喜欢 unbelievable processors 和机器学习。", add_special_tokens=False)
    ids = np.asarray([enc.ids])
    got = _words(tok, "wordpiece", "zh").starts(ids, np.ones_like(ids, dtype=bool))[0]
    latin = [i for i, t in enumerate(enc.tokens) if t.removeprefix("##").isascii()]
    assert len(latin) > 2  # the small vocabulary splits both words into pieces
    assert [bool(got[i]) for i in latin] == [table[enc.ids[i]] for i in latin]
    assert sum(bool(got[i]) for i in latin) == 2


def _masked_batch(kind: str, language: str, masking: str, words: bool):
    tok = _tokenizer(kind, language)
    sp = special_tokens_for(kind)
    rows = []
    for line in TEXTS[language].splitlines():
        enc = tok.encode(line, add_special_tokens=False)
        rows.append(torch.tensor([2, *enc.ids, 3]))  # any two specials around the text
    rows = rows * 400
    ids, attention = pad_batch(rows, pad_id=0)
    segmented = _words(tok, kind, language) if words else None
    tables = MaskTables.build(
        tok.get_vocab_size(),
        list(range(SPECIAL)),
        word_start_table(tok, sp),
        4,
        words=segmented,
    )
    keys = sequence_keys(7, 0, torch.arange(len(rows)))
    result = mask_tokens(ids, attention, keys, tables, MaskingSettings(kind=masking))
    return ids, attention, tables, result


def _word_ids(ids, attention, tables) -> torch.Tensor:
    maskable = attention & ~tables.special[ids]
    if tables.words is not None:
        starts = torch.from_numpy(tables.words.starts(ids.numpy(), maskable.numpy()))
    else:
        starts = tables.word_start[ids]
    starts = starts & maskable
    return torch.cumsum(starts.to(torch.int64), 1)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("language", ["zh", "ja"])
def test_whole_word_masking_masks_segmenter_words_whole(kind: str, language: str) -> None:
    ids, attention, tables, r = _masked_batch(kind, language, "wwm", words=True)
    word = _word_ids(ids, attention, tables)  # [B, L]
    maskable = attention & ~tables.special[ids]
    for b in range(0, ids.shape[0], 37):
        for w in word[b][maskable[b]].unique().tolist():
            inside = (word[b] == w) & maskable[b]
            got = r.masked[b][inside]
            assert got.all() or not got.any(), (b, w)
    # BERT's budget, 15% of the row with [CLS] and [SEP], never exceeded.
    budget = torch.clamp(torch.round(attention.sum(1) * 0.15), min=1)
    assert bool((r.masked.sum(1) <= budget).all())
    assert r.masked.sum().item() > 0.05 * maskable.sum().item()
    # Words of several pieces are masked: more than single characters.
    sizes = torch.stack([(word == w) & maskable for w in range(1, 4)]).sum(2)
    assert bool((sizes > 1).any())


@pytest.mark.parametrize("language", ["zh", "ja"])
def test_ngram_and_span_masking_take_whole_segmenter_words(language: str) -> None:
    for masking in ("ngram", "span"):
        ids, attention, tables, r = _masked_batch("wordpiece", language, masking, words=True)
        word = _word_ids(ids, attention, tables)
        maskable = attention & ~tables.special[ids]
        runs_inside_words = 0
        for b in range(0, ids.shape[0], 11):
            masked = r.masked[b]
            # A masked run never starts inside a segmenter word (span's last span may end in one).
            starts = masked.clone()
            starts[1:] &= ~masked[:-1]
            for p in starts.nonzero().flatten().tolist():
                first = (word[b] == word[b, p]) & maskable[b]
                runs_inside_words += int(first.nonzero()[0].item() != p)
        assert runs_inside_words == 0, masking


def test_segmenter_words_change_what_is_masked() -> None:
    """Without the segmenter, WordPiece's words in Chinese are single characters."""
    ids, attention, _, with_words = _masked_batch("wordpiece", "zh", "wwm", words=True)
    _, _, plain_tables, plain = _masked_batch("wordpiece", "zh", "wwm", words=False)
    plain_words = _word_ids(ids, attention, plain_tables)
    maskable = attention & ~plain_tables.special[ids]
    han = [i for i in range(ids.shape[1]) if bool(maskable[0, i])]
    assert len(plain_words[0, han].unique()) == len(han)  # one word per character
    assert not torch.equal(with_words.masked, plain.masked)


@pytest.mark.parametrize("kind", KINDS)
def test_korean_words_are_space_separated(kind: str) -> None:
    assert segmented_words("ko", ["x"], special_tokens_for(kind)) is None
    tok = _tokenizer(kind, "ko")
    enc = tok.encode(KOREAN, add_special_tokens=False)
    rows = [torch.tensor([2, *enc.ids[i : i + 60], 3]) for i in range(0, len(enc.ids), 60)]
    ids, attention = pad_batch(rows * 200, pad_id=0)
    tables = MaskTables.build(
        tok.get_vocab_size(),
        list(range(SPECIAL)),
        word_start_table(tok, special_tokens_for(kind)),
        4,
    )
    keys = sequence_keys(3, 0, torch.arange(ids.shape[0]))
    r = mask_tokens(ids, attention, keys, tables, MaskingSettings(kind="wwm"))
    # Every masked run covers whole words: the character spans of its pieces, mapped back
    # to the text, begin and end at a space or punctuation (WordPiece makes punctuation a
    # word of its own), or where the row does.
    offsets = enc.offsets
    for b in range(0, ids.shape[0], 13):
        chunk = offsets[(b % len(rows)) * 60 : (b % len(rows)) * 60 + 60]
        masked = r.masked[b, 1 : 1 + len(chunk)].tolist()
        for i, m in enumerate(masked):
            if not m:
                continue
            lo, hi = chunk[i]
            if i > 0 and not masked[i - 1]:
                assert _boundary(KOREAN[lo - 1]) or _boundary(KOREAN[lo]), KOREAN[lo - 3 : lo + 3]
            if i + 1 < len(masked) and not masked[i + 1]:
                assert hi == len(KOREAN) or _boundary(KOREAN[hi]) or _boundary(KOREAN[hi - 1])


def _boundary(char: str) -> bool:
    return char.isspace() or unicodedata.category(char).startswith("P")


def test_a_missing_segmenter_is_one_clear_error(monkeypatch) -> None:
    monkeypatch.setitem(
        segmenters.SEGMENTERS,
        "jieba",
        (("no_such_module_here",), segmenters.SEGMENTERS["jieba"][1]),
    )
    with pytest.raises(UsageError, match=r"masking of zh text needs its words from jieba"):
        segmented_words("zh", ["x"], special_tokens_for("wordpiece"))
