"""Normalization and sentence splitting."""

from hypothesis import given
from hypothesis import strategies as st

from clozeworks.corpus.dedup.exact import choose_kept, exact_key
from clozeworks.corpus.text.normalize import normalize_text
from clozeworks.corpus.text.sentences import split_sentences


def test_normalize_collapses_spaces_keeps_lines() -> None:
    text = "  Caf\u0065\u0301  au\t\tlait\r\nsecond\x00 line\n\n\n\nnext para \u200b"
    assert normalize_text(text) == "Caf\u00e9 au lait\nsecond line\n\nnext para \u200b".strip()


def test_nfkc_folds_compatibility_forms() -> None:
    assert normalize_text("ﬁne ２", "NFKC") == "fine 2"
    assert normalize_text("ﬁne", "NFC") == "ﬁne"


@given(st.text())
def test_normalize_is_idempotent(text: str) -> None:
    once = normalize_text(text)
    assert normalize_text(once) == once


def _normalized_until_issue_39(text: str, form: str) -> str:
    import re
    import unicodedata

    text = unicodedata.normalize(form, text.replace("\r\n", "\n").replace("\r", "\n"))
    text = re.sub("[\x00-\x08\x0b-\x1f\x7f-\x9f\ufeff]", "", text)
    text = "\n".join(" ".join(line.split()) for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


# ASCII (every control among it) and the whitespace and marks where the ASCII path could
# go wrong, so that both of normalize_text's ways are drawn often.
_MIXED = st.text(
    alphabet=st.one_of(
        st.characters(max_codepoint=0x7F),
        st.sampled_from(" \n\n\r\t\x0b\x0c\x1c\x85\xa0\u2028\u3000\ufeff\u0301é"),
    ),
    max_size=40,
)


@given(_MIXED, st.sampled_from(["NFC", "NFKC"]))
def test_normalize_gives_what_it_gave_before_its_ascii_way(text: str, form: str) -> None:
    assert normalize_text(text, form) == _normalized_until_issue_39(text, form)


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_exact_key_collapses_what_the_regex_it_replaced_did(text: str) -> None:
    import hashlib
    import re

    before = re.sub(r"\s+", " ", text.casefold()).strip()  # the key until issue 39
    assert exact_key(text) == hashlib.sha1(before.encode("utf-8")).hexdigest()


@given(st.text(alphabet=st.sampled_from("aB. \n\n\t\r\x0b\x0c\x1c\x1fé"), max_size=30))
def test_exact_key_of_ascii_text_is_the_general_ways(text: str) -> None:
    import hashlib

    for t in (text, normalize_text(text)):  # the shape `clean` writes, and any other
        general = " ".join(t.casefold().split())
        assert exact_key(t) == hashlib.sha1(general.encode("utf-8")).hexdigest()


def test_exact_key_ignores_case_and_spacing() -> None:
    assert exact_key("Hello  World\n") == exact_key("hello world")
    assert exact_key("hello world") != exact_key("hello, world")
    assert choose_kept(["b#2", "a#9", "b#1"]) == "a#9"


def test_sentences_respect_abbreviations_decimals_initials_and_quotes() -> None:
    text = (
        "Dr. Smith paid $3.50 for it. J. R. R. Tolkien wrote it, e.g. in 1937. "
        '"Is it done?" she asked. Yes! It is.\n\nA new paragraph'
    )
    assert split_sentences(text) == [
        "Dr. Smith paid $3.50 for it.",
        "J. R. R. Tolkien wrote it, e.g. in 1937.",
        '"Is it done?" she asked.',
        "Yes!",
        "It is.",
        "A new paragraph",
    ]


@given(st.text(alphabet=st.sampled_from('ab. ?!"\nXY1'), max_size=200))
def test_sentence_split_keeps_every_word(text: str) -> None:
    assert " ".join(split_sentences(text)).split() == text.split()
