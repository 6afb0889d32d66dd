"""Character counts and the WordPiece alphabet plan."""

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from clozeworks.corpus.vocab.alphabet import CharCounter, char_counts, plan_alphabet
from clozeworks.corpus.vocab.train import VocabConfig, untrained_tokenizer


@given(st.lists(st.text(), max_size=20))
def test_char_counts_equal_a_plain_counter(texts) -> None:
    assert char_counts(texts) == dict(Counter("".join(texts)))


def test_counters_merge_and_survive_large_texts() -> None:
    big = "ab€" * 700_000 + "🤗"  # crosses the flush size; one astral character
    a, b = CharCounter(), CharCounter()
    a.add(big)
    b.add("a")
    b.merge(a)
    assert b.result() == {"a": 700_001, "b": 700_000, "€": 700_000, "🤗": 1}


def test_plan_counts_normalized_characters_and_breaks_ties_by_code_point() -> None:
    tok = untrained_tokenizer(VocabConfig(kind="wordpiece"))
    raw = {"A": 5, "a": 5, "É": 4, "z": 4, "y": 4, " ": 100, "\n": 9, "\x00": 3, "中": 2, ",": 7}
    plan = plan_alphabet(raw, tok, limit=4)
    # a: 10, e (from É, accent stripped): 4, y: 4, z: 4, ",": 7, 中: 2; whitespace and
    # control characters are not characters of any word. The 4 most frequent, ties by
    # code point: a, ",", e, y (z loses to y).
    assert plan.alphabet == (",", "a", "e", "y")
    assert plan.seen == 6
    # Punctuation never continues a word, so it gets no ## piece.
    assert plan.continuations == ("##a", "##e", "##y")


def test_cased_plan_keeps_case_and_accents_and_cjk_never_continues() -> None:
    tok = untrained_tokenizer(VocabConfig(kind="wordpiece", cased=True))
    plan = plan_alphabet({"A": 1, "é": 1, "中": 1}, tok, limit=None)
    assert plan.alphabet == ("A", "é", "中")
    assert plan.continuations == ("##A", "##é")
