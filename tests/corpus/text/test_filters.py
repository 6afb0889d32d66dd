"""Quality filters: each rule fires on text built to trip it, and only on that text."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clozeworks.corpus.text.filters import (
    FILTERS,
    C4Filter,
    FineWebFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    LanguageFilter,
    LengthFilter,
    apply_filters,
    build_filters,
    expand_names,
    filter_params,
)
from clozeworks.corpus.text.filters.gopher import _word_ids, duplicate_ngram_chars, top_ngram_chars
from clozeworks.corpus.text.filters.text import split_words, terminal_punctuation, word_counts
from clozeworks.schemas.errors import BadInputError, UsageError

PROSE = (
    "The river runs past the old mill and into the valley below the town.\n"
    "Farmers bring their grain to the mill to have it ground into flour.\n"
    "In the spring the water is high and the wheel turns quickly all day.\n"
    "Children like to watch the wheel and throw sticks into the stream.\n"
    "Most of the families in the valley have worked with the mill for years."
)


def reason(f, text):
    result = f.filter(text)
    return "kept" if result.keep else result.reason


def test_c4_removes_lines_and_keeps_the_page() -> None:
    text = (
        "Welcome!\n"  # too few words
        "Please enable JavaScript to view the comments on this page.\n"
        "By using this site you agree to our terms of use and policies.\n"
        "This line has no terminal punctuation at the end of it\n"
        "Hurricanes form over warm ocean water near the equator.[1]\n"
        "They draw energy from the heat released when water vapour condenses.\n"
        "Strong winds can reach speeds of more than two hundred kilometres an hour.\n"
        "Wait for it...\n"
    )
    result = C4Filter().filter(text)
    assert result.keep
    assert result.text == (
        "Hurricanes form over warm ocean water near the equator.\n"
        "They draw energy from the heat released when water vapour condenses.\n"
        "Strong winds can reach speeds of more than two hundred kilometres an hour."
    )


def test_c4_line_ends_where_its_citation_marker_is_removed() -> None:
    # An extractor that joins a footnote marker with a space ("energy. [64]", as in HTML
    # where the marker is its own element) must not cost the line its final period: the
    # Japanese translation of the same page writes "。[64]" and kept its line.
    lines = [
        "Hurricanes form over warm ocean water near the equator. [64]",
        "They draw energy from the heat released when water vapour condenses.[65]",
        "Strong winds can reach speeds of more than two hundred kilometres an hour. [edit]",
    ]
    result = C4Filter().filter("\n".join(lines))
    assert result.keep
    assert result.text.splitlines() == [line[: line.rindex(".") + 1] for line in lines]


def test_c4_page_rules() -> None:
    assert (
        reason(C4Filter(), PROSE + "\nLorem ipsum dolor sit amet, consectetur elit.")
        == "lorem_ipsum"
    )
    assert (
        reason(C4Filter(), PROSE + "\nThe function body is { return x; } as shown.")
        == "curly_bracket"
    )
    assert reason(C4Filter(), "One sentence only, with enough words in it.") == "too_few_sentences"
    assert (
        reason(C4Filter(min_sentences=1), "One sentence only, with enough words in it.") == "kept"
    )
    long_word = "word " * 4 + "x" * 1001 + "."
    assert C4Filter(min_sentences=0).filter(long_word).text == ""


def _words(n: int, word: str = "water") -> str:
    return " ".join([word] * n)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (PROSE, "kept"),
        ("the and of to be " * 5, "too_few_words"),
        ("the and " + "a b c d " * 20, "short_words"),
        ("the and " + "internationalization " * 60, "long_words"),
        (PROSE + " #" * 12, "hash_ratio"),
        (PROSE + " ..." * 12, "ellipsis_ratio"),
        ("\n".join("- " + line for line in PROSE.split("\n")), "bullet_lines"),
        ("\n".join(line + " ..." for line in PROSE.split("\n")), "ellipsis_lines"),
        (PROSE + " 1234 5678" * 20, "alpha_words"),
        (_words(60, "water river valley"), "stop_words"),
    ],
)
def test_gopher_quality_reasons(text, expected) -> None:
    assert reason(GopherQualityFilter(), text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (PROSE, "kept"),
        ("same paragraph here.\n\nsame paragraph here.\n\nother one.", "dup_para_frac"),
        (PROSE + "\nlonger repeated line " * 1, "kept"),
        (
            "\n".join(["a line that repeats"] * 4 + ["one", "two", "three", "four"]),
            "dup_line_frac",
        ),
        ("spam eggs " * 20 + PROSE, "top_2gram"),
    ],
)
def test_gopher_repetition_reasons(text, expected) -> None:
    assert reason(GopherRepetitionFilter(), text) == expected


def test_repeated_ngram_counting_matches_a_plain_reading() -> None:
    words = ["a", "b", "c", "d", "e", "a", "b", "c", "d", "e", "x", "a", "b", "c", "d", "e"]
    ids, lengths = _word_ids(words)
    # Top 2-gram "a b" occurs 3 times; with its space it covers 3 chars each.
    assert top_ngram_chars(ids, lengths, 2) == 9
    # Without spaces between words (a segmenter's Chinese or Japanese), 2 chars each.
    assert top_ngram_chars(ids, lengths, 2, gap=0) == 6
    # 5-grams: "abcde" at 0 is new; the repeat at 5 counts 5 chars and jumps to 10;
    # positions 10.. give "xabcd" (new) then "abcde" at 11 (seen) -> 5 more.
    assert duplicate_ngram_chars(ids, lengths, 5, float("inf")) == 10


# What spaCy's English tokenizer (datatrove's) gives for each, checked with spaCy 3.8.
@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('He said: "stop (now)!"', ["He", "said", ":", '"', "stop", "(", "now", ")", "!", '"']),
        ("Wait...", ["Wait", "..."]),
        ("Edit /etc/apt/sources.list.", ["Edit", "/etc", "/", "apt", "/", "sources.list", "."]),
        ("Run dpkg-buildpackage -us", ["Run", "dpkg", "-", "buildpackage", "-us"]),
        ("You won't see v1.2.3 or 12.1, e.g. Debian's.",
         ["You", "wo", "n't", "see", "v1.2.3", "or", "12.1", ",", "e.g.", "Debian", "'s", "."]),
        ("See https://www.debian.org/doc/.", ["See", "https://www.debian.org/doc/."]),
        ("(C) 2003-2004 J. Doe <j@example.org>, GPL-2+ and/or BSD.",
         ["(", "C", ")", "2003", "-", "2004", "J.", "Doe", "<", "j@example.org", ">", ",",
          "GPL-2", "+", "and/or", "BSD", "."]),
        ("x=1 a=b C# #include 50% $5 12kg 100MB", ["x=1", "a", "=", "b", "C", "#", "#",
         "include", "50", "%", "$", "5", "12", "kg", "100", "MB"]),
        ("the U.S. and etc.", ["the", "U.S.", "and", "etc", "."]),
        ("모델은 훈련됩니다. 한국어,영어", ["모델은", "훈련됩니다", ".", "한국어", ",", "영어"]),
    ],
)  # fmt: skip
def test_words_are_cut_as_spacy_cuts_them(text, words) -> None:
    assert split_words(text) == words


_PIECES = st.sampled_from(
    [*"ab AZ09.,;:!?()[]{}<>\"'`’“”-–—/=+*%$#&_~…。、한文\n\t@", "n't", "'s", "e.g.", "...",
     "http://x.org/", "12kg", "MB"]
)  # fmt: skip


@given(st.lists(_PIECES, max_size=60).map("".join))
def test_words_are_the_text_without_its_spaces(text: str) -> None:
    """However a chunk is peeled and cut, no character is lost, doubled or moved."""
    words = split_words(text)
    assert "".join(words) == "".join(text.split())
    assert all(word and not any(c.isspace() for c in word) for word in words)


def test_long_runs_of_marks_split_as_short_ones() -> None:
    """A chunk is peeled by position with its suffix sought near its end: a rule of
    200,000 `=` (a few seconds per 20,000 when each step sliced the rest) is 200,000
    words, and a run of dots stays one suffix however long."""
    n = 200_000
    assert split_words("=" * n) == ["="] * n
    assert split_words("(" * n + "word" + ")" * n) == ["("] * n + ["word"] + [")"] * n
    assert split_words("word" + "." * n) == ["word", "." * n]
    # A long run of letters is not scanned as a URL's scheme at every step.
    assert split_words("x" * n + ")" * n) == ["x" * n] + [")"] * n
    assert split_words("(e.g.") == ["(", "e.g."]  # what is left after a prefix may be whole
    assert split_words("`.Z`") == ["`", ".Z", "`"]  # a peeled quote is not the rest's


def test_alphabetic_words_are_words_with_a_letter() -> None:
    """Gopher's rule counts words with a letter: a command line's options and paths are
    words with letters, its numbers (`12.1`, `2024`) and marks are not."""
    command = "Run dpkg-buildpackage -us -uc in /usr/src/pkg-2.0 (see Section 12.1 of 2024)."
    counts = word_counts(split_words(command))
    assert counts.distinct == {
        "Run", "dpkg", "buildpackage", "-us", "-uc", "in", "/usr", "src", "pkg-2.0", "see",
        "Section", "12.1", "of", "2024",
    }  # fmt: skip
    assert (counts.words, counts.symbols, counts.without_letter) == (14, 6, 2)
    assert counts.chars == sum(map(len, counts.distinct))
    prose_with_numbers = PROSE + " 12.1 2024 3.14 1,000" * 20
    assert reason(GopherQualityFilter(), prose_with_numbers) == "alpha_words"


def test_fineweb_reasons() -> None:
    f = FineWebFilter()
    assert reason(f, PROSE) == "kept"
    assert reason(f, PROSE.replace(".", "")) == "line_punct_ratio"
    assert (
        reason(f, "\n".join(["Short line."] * 2 + [f"Item {i}." for i in range(8)]))
        == "short_line_ratio"
    )
    assert reason(f, PROSE + "\n" + PROSE.split("\n")[0]) == "char_dup_ratio"
    listy = "\n".join(f"Item {i}." for i in range(30))
    assert reason(FineWebFilter(max_short_lines_ratio=1.0), listy) == "list_ratio"
    assert "。" in terminal_punctuation() and "?" in terminal_punctuation()


def test_language_filter_with_the_bundled_langid_model() -> None:
    pytest.importorskip("py3langid")
    f = LanguageFilter()
    assert reason(f, PROSE) == "kept"
    german = "Der Fluss fließt an der alten Mühle vorbei und hinunter ins Tal unter der Stadt."
    assert reason(f, german) == "other_language"
    assert reason(LanguageFilter(languages="en,de"), german) == "kept"
    with pytest.raises(UsageError, match="unknown language backend"):
        LanguageFilter(backend="nope").check()
    with pytest.raises(UsageError, match=r"does not identify xx-bogus \(it knows ace, af"):
        LanguageFilter(languages="en,xx-bogus").check()
    LanguageFilter(languages="en,de").check()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"length": {"min_chars": -5}}, r"--min-chars must be a number >= 0, got -5"),
        ({"length": {"min_chars": 500, "max_chars": 100}}, r"--min-chars 500 is above --max"),
        ({"gopher-quality": {"max_symbol_word_ratio": 2.0}}, r"is a fraction .* got 2\.0"),
        ({"gopher-repetition": {"dup_line_frac": float("nan")}}, r"got nan"),
        ({"language": {"min_score": 1.5}}, r"--language-min-score is a fraction"),
    ],
)
def test_thresholds_that_cannot_mean_anything_are_refused(options, message) -> None:
    names = [name for name in options]
    with pytest.raises(ValueError, match=message):
        build_filters(names, options)


def test_apply_filters_prefixes_reasons_and_passes_text_on() -> None:
    filters = build_filters(["c4", "length"], {"length": {"min_chars": 10_000}})
    assert apply_filters(PROSE, filters).reason == "length.too_short"
    assert apply_filters("x", [LengthFilter()]).keep


def test_registry_flags_and_aliases() -> None:
    assert expand_names(["gopher", "c4", "gopher-quality"]) == [
        "gopher-quality",
        "gopher-repetition",
        "c4",
    ]
    with pytest.raises(ValueError, match="unknown filter 'nope'"):
        expand_names(["nope"])
    flags = [p.flag for name in FILTERS for p in filter_params(name)]
    assert len(flags) == len(set(flags))
    assert "min-chars" in flags and "c4-min-words-per-line" in flags
    c4 = {p.field: p for p in filter_params("c4")}
    assert c4["min_sentences"].default == 3 and c4["curly_bracket"].type is bool


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab .!?#…-•{\n\t1é"), max_size=300))
def test_every_filter_answers_any_text(text) -> None:
    for name in FILTERS:
        if name == "language":
            continue
        result = FILTERS[name]().filter(text)
        assert result.keep or result.reason
    assert split_words(text) == split_words(text)


def test_a_language_model_on_a_bucket_is_copied_where_fasttext_opens_it() -> None:
    """Remote workers read `--language-model-path` from a URL (fasttext opens only local
    files); the launcher refuses a local path for them (`StageRun.require_shared`)."""
    import fsspec

    from clozeworks.corpus.text.filters.language import LanguageFilter, _local_copy

    with fsspec.open("memory://models/lid.bin", "wb") as f:
        f.write(b"\x00model bytes")
    local = _local_copy("memory://models/lid.bin")
    assert Path(local).read_bytes() == b"\x00model bytes"
    assert _local_copy("memory://models/lid.bin") == local  # copied once per machine
    assert _local_copy("/data/lid.bin") == "/data/lid.bin"
    with pytest.raises(BadInputError, match=r"memory://models/none\.bin: cannot read"):
        _local_copy("memory://models/none.bin")
    fast = LanguageFilter(backend="fasttext", model_path="gs://b/lid.bin")
    assert fast.worker_files() == [("language-model-path", "gs://b/lid.bin")]
    assert LanguageFilter().worker_files() == []
