"""Sentence splitting (sentencex plus our whitespace rule)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clozeworks.corpus.text.sentences import split_sentences


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
    ],
)
def test_hard_cases(text: str, sentences: list[str]) -> None:
    assert split_sentences(text) == sentences


def test_other_languages() -> None:
    assert split_sentences("Das ist z. B. gut. Noch ein Satz!", "de") == [
        "Das ist z. B. gut.",
        "Noch ein Satz!",
    ]


@given(st.text(alphabet=st.sampled_from('ab. ?!"\n\u201c\u201d()XY1'), max_size=200))
def test_every_word_kept_in_order(text: str) -> None:
    assert " ".join(split_sentences(text)).split() == text.split()
