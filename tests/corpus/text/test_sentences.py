"""Sentence splitting (sentencex's boundaries, cut at whitespace in the original text)."""

import re

import pytest
import sentencex
from hypothesis import example, given
from hypothesis import strategies as st

from clozeworks.corpus.text.sentences import cut_at, cut_tiled, piece_starts, split_sentences
from tests.corpus.text import real_documents


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        (
            "At 5 a.m. Mr. Smith went to the bank. He left at 6 P.M. Mr. Smith then went home.",
            [
                "At 5 a.m. Mr. Smith went to the bank.",
                "He left at 6 P.M.",
                "Mr. Smith then went home.",
            ],
        ),
        ("She has $100.00. It is in her bag.", ["She has $100.00.", "It is in her bag."]),
        (
            "Prof. A. B. Clark spoke first. Everyone listened.",
            ["Prof. A. B. Clark spoke first.", "Everyone listened."],
        ),
        (
            'She turned to him, "This is great." She held the book out.',
            ['She turned to him, "This is great."', "She held the book out."],
        ),
        ("I live in the U.S. How about you?", ["I live in the U.S.", "How about you?"]),
        (
            "Call os.path.join() here. Then self._rescale(exp) runs.",
            ["Call os.path.join() here.", "Then self._rescale(exp) runs."],
        ),
        ("Para one ends here\n\nPara two starts", ["Para one ends here", "Para two starts"]),
        ("Line one.\r\n\r\nLine\ttwo.\tThree", ["Line one.", "Line\ttwo.", "Three"]),
    ],
)
def test_hard_cases(text: str, sentences: list[str]) -> None:
    assert split_sentences(text) == sentences


def test_other_languages() -> None:
    assert split_sentences("Das ist z. B. gut. Noch ein Satz!", "de") == [
        "Das ist z. B. gut.",
        "Noch ein Satz!",
    ]
    assert split_sentences("Это первое. А это второе?", "ru") == ["Это первое.", "А это второе?"]


@pytest.mark.parametrize("language", ["ja", "zh", "en"])
def test_chinese_and_japanese_sentences_end_without_a_space(language: str) -> None:
    text = "今日は晴れです。明日は雨です！本当？中文句子。第二句。"
    assert split_sentences(text, language) == [
        "今日は晴れです。",
        "明日は雨です！",
        "本当？",
        "中文句子。",
        "第二句。",
    ]
    korean = "오늘은 맑습니다. 내일은 비가 옵니다! 정말요?"
    assert split_sentences(korean, "ko") == ["오늘은 맑습니다.", "내일은 비가 옵니다!", "정말요?"]


def _words(text: str) -> list[str]:
    """Words, each also cut after full-width punctuation (where Chinese and Japanese
    sentences end without a space)."""
    return [p for w in text.split() for p in re.split(r"(?<=[。！？」』）])", w) if p]


def _words_kept(text: str, sentences: list[str]) -> bool:
    return _words(" ".join(sentences)) == _words(text)


_DOCUMENTS = real_documents.documents()


@pytest.mark.parametrize(
    ("name", "language", "text"), _DOCUMENTS, ids=[name for name, _, _ in _DOCUMENTS]
)
def test_real_documents_keep_every_word(name: str, language: str, text: str) -> None:
    sentences = split_sentences(text, language)
    assert _words_kept(text, sentences), name
    assert all(s == s.strip() and s for s in sentences)
    if len(text) > real_documents.LONG and language == "en":
        assert len(sentences) > 100  # split, not one document-long sentence


def test_the_segmenter_drops_whitespace_and_no_word_is_glued() -> None:
    """The case of issue 38: past ~10 KB sentencex loses the blank line between two pieces
    that end and start without whitespace ("GPL-2+" + "Files:" became "GPL-2+Files:")."""
    paragraphs = [f"Heading {i} without a stop\n\nA sentence here. Another one" for i in range(400)]
    text = "\n\n".join(paragraphs)
    pieces = list(sentencex.segment("en", text))
    assert sum(map(len, pieces)) < len(text)  # the segmenter really left whitespace out
    sentences = split_sentences(text)
    assert _words_kept(text, sentences)
    assert "stop Heading" not in " ".join(sentences)
    assert sum(s.startswith("Heading") for s in sentences) == 400


_ALPHABET = st.sampled_from(
    list('ab. ?!"\n\r\t\u201c\u201d()XY1\u00e9\ud55c\u6587\u3002\uff01\u300d')
)


@given(st.text(alphabet=_ALPHABET, max_size=200))
def test_every_word_kept_in_order(text: str) -> None:
    assert _words_kept(text, split_sentences(text))


@given(
    st.text(alphabet=_ALPHABET, max_size=300),
    st.lists(st.integers(min_value=-5, max_value=310), max_size=40),
)
@example(" 。1", [2, 1])  # a cut before the last one gave "。" twice
def test_cuts_anywhere_keep_every_word(text: str, starts: list[int]) -> None:
    """Whatever boundaries a segmenter proposes, in any order, past either end or with
    anything dropped between its pieces, the words come out whole and in order."""
    assert _words_kept(text, cut_at(text, starts))


@given(
    st.lists(
        st.tuples(
            st.text(alphabet=st.sampled_from("abc.X"), min_size=1, max_size=12),
            st.sampled_from(["", " ", "\n\n", ". ", "\r\n"]),
        ),
        max_size=30,
    ),
    st.data(),
)
def test_pieces_with_their_whitespace_dropped_are_found(parts, data) -> None:
    """A segmenter that returns the text's pieces with the whitespace between them left
    out, as sentencex does at a chunk's end: every piece is located at a place in the text
    that holds it, and no word is glued across a dropped gap."""
    text = "".join(word + gap for word, gap in parts)
    pieces = [word + (gap if data.draw(st.booleans()) else "") for word, gap in parts]
    starts = piece_starts(text, pieces)
    assert len(starts) == len(pieces)
    assert all(text.startswith(p, s) for p, s in zip(pieces, starts, strict=True))
    assert _words_kept(text, cut_at(text, starts))


def _cut_by_search(text: str, language: str = "en") -> list[str]:
    return cut_at(text, piece_starts(text, sentencex.segment(language, text)))


@pytest.mark.parametrize(
    ("name", "language", "text"), _DOCUMENTS, ids=[name for name, _, _ in _DOCUMENTS]
)
def test_tiled_pieces_cut_as_found_ones(name: str, language: str, text: str) -> None:
    """Where the pieces tile the text, cutting them directly gives what locating each
    piece and cutting the text there gives."""
    pieces = sentencex.segment(language, text)
    if "".join(pieces) == text:
        assert cut_tiled(pieces) == _cut_by_search(text, language), name
    assert split_sentences(text, language) == _cut_by_search(text, language), name


@given(
    st.lists(st.text(alphabet=_ALPHABET, max_size=12), max_size=30),
    st.sampled_from(["en", "ja", "zh"]),
)
def test_any_tiling_cuts_as_the_search_does(pieces: list[str], language: str) -> None:
    text = "".join(pieces)
    assert cut_tiled(pieces) == cut_at(text, piece_starts(text, pieces))
    assert split_sentences(text, language) == _cut_by_search(text, language)
