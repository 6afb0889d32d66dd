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


def test_uncased_wordpiece_is_the_same_every_run_with_marks_stripped_after_latin() -> None:
    """Telugu vowel signs are combining marks: after "a" the uncased normalizer strips them
    (as it strips Latin accents), after a Telugu letter it keeps them. They must still be
    handed to the trainer as continuations, in order, or their ids follow hash order."""
    from clozeworks.corpus.vocab.train import VocabConfig, train_tokenizer

    marks = [chr(c) for c in (0x0C3E, 0x0C3F, 0x0C40, 0x0C46, 0x0C47, 0x0C48, 0x0C4A, 0x0C4B)]
    telugu = " ".join(f"\u0c15{m} \u0c1f{m}\u0c15" for m in marks)
    texts = [f"{telugu} the model reads text and learns words {i}" for i in range(40)]
    config = VocabConfig(kind="wordpiece", vocab_size=300)
    runs = {train_tokenizer(texts, config).to_str() for _ in range(3)}
    assert len(runs) == 1
    vocab = train_tokenizer(texts, config).get_vocab()
    assert all(f"##{m}" in vocab for m in marks)
