"""The encoder the shard path chooses gives `tokenizers`' ids, for every vocabulary kind:
every code point of Unicode in several contexts, every three characters of ASCII's
punctuation, spaces and a few letters, real text in more than 15 languages (the gettext
catalogs Debian ships), and generated text biased to whitespace runs, quotes and
contractions, repeats, combining marks, controls and unassigned code points. Where the
fast path does not take a text, `tokenizers` encodes it, so every comparison here is of
`encode` against `Tokenizer.encode_batch(..., add_special_tokens=False)`."""

from __future__ import annotations

import itertools
import random
import unicodedata

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from clozeworks.corpus.text.sentences import split_sentences
from clozeworks.corpus.vocab import fast, proven
from clozeworks.corpus.vocab.train import VocabConfig, train_tokenizer
from tests.corpus.catalogs import LOCALES, catalog_text
from tests.corpus.text import real_documents
from tests.corpus.vocab.test_fast import KINDS

# Catalog directories of this many languages at least, in many scripts.
LANGUAGE_CODES = (
    "ar bg cs de el es fa fr he hi hu id it ja ka ko nl pl pt_BR ro ru sv th tr uk vi zh_CN zh_TW"
)
LANGUAGES = LANGUAGE_CODES.split()
CATALOG_CHARS = 40_000  # of each language's translations

# Runs that give a byte-level vocabulary merges of hundreds of bytes (a token of 256 bytes
# is where tokie cut 128 `é` in two).
RUNS = [
    " ".join(c * n for n in (2, 4, 8, 16, 32, 64, 128, 256) for _ in range(10)) for c in "=-é한の中"
]


@pytest.fixture(scope="module")
def catalogs() -> dict[str, str]:
    found = {lang: text for lang in LANGUAGES if (text := catalog_text(lang, CATALOG_CHARS))}
    assert len(found) >= 15, f"gettext catalogs of only {sorted(found)} under {LOCALES}"
    return found


DOCUMENTS = [text for _, _, text in real_documents.documents()]


@pytest.fixture(scope="module", params=list(KINDS))
def encoders(request):
    """(kind, chosen encode, reference encode) for a vocabulary of each kind."""
    tok = train_tokenizer(DOCUMENTS + RUNS, VocabConfig(vocab_size=3000, **KINDS[request.param]))
    _, encode = fast.fast_encoder(tok)

    def reference(texts):
        return fast.flat_ids([e.ids for e in tok.encode_batch(texts, add_special_tokens=False)])

    return request.param, encode, reference


def differing(encode, reference, texts: list[str]) -> list[str]:
    """The texts whose ids differ (a few, for the message)."""
    (a, a_len), (b, b_len) = encode(texts), reference(texts)
    if np.array_equal(a_len, b_len) and np.array_equal(a, b):
        return []
    same = proven.same_per_text(encode, reference, texts)
    return [t for t, ok in zip(texts, same, strict=True) if not ok][:5]


def test_the_fast_path_is_taken(encoders) -> None:
    """With tokie installed, the fast path takes plain text (or the tests below would
    compare `tokenizers` with itself)."""
    if fast.importlib.util.find_spec("tokie") is None:
        pytest.skip("tokie is not installed")
    _, encode, _ = encoders
    assert isinstance(encode, proven.Guarded)
    texts = [t for d in DOCUMENTS for t in split_sentences(d, "en")]
    assert encode.inside(texts).mean() > 0.9


def _in_contexts(char: str) -> list[str]:
    """A character alone, between words, after a tab, inside a word, tripled, among quotes,
    brackets and contractions; repeated just short of the longest run and far past it."""
    c = char
    around = f"{c} x {c} y\t{c}\nAb{c}cd {c}{c}{c} '{c}' ({c}) {c}. {c}ing {c}'s"
    return [around, c * (proven.SHORT_RUN - 1), c * 300]


def test_every_code_point_in_context(encoders) -> None:
    """Every code point but surrogates: where the guard takes a text, the fast path's ids
    are `tokenizers`'; elsewhere `tokenizers` encodes it (checked for a sample)."""
    _, encode, reference = encoders
    if not isinstance(encode, proven.Guarded):
        pytest.skip("the fast path is not chosen")
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    taken = [c for c in chars if not encode.outside(c)]
    assert all(unicodedata.category(c) not in ("Cn", "Co") and ord(c) < 0x10000 for c in taken)
    texts = [t for c in taken for t in _in_contexts(c)]
    inside = encode.inside(texts)
    fast_texts = [t for t, ok in zip(texts, inside, strict=True) if ok]
    for i in range(0, len(fast_texts), 20_000):
        batch = fast_texts[i : i + 20_000]
        assert not differing(encode.fast, reference, batch)
    left_out = random.Random(0).sample([c for c in chars if encode.outside(c)], 2000)
    texts = [t for c in left_out for t in _in_contexts(c)]
    assert not encode.inside(texts).any()
    assert not differing(encode, reference, texts)


@pytest.fixture(scope="module", params=list(KINDS))
def long_runs(request):
    """(chosen encode, reference) for a vocabulary without long tokens: the fast path takes
    runs of up to `proven.LONG_RUN` characters there."""
    tok = train_tokenizer(DOCUMENTS, VocabConfig(vocab_size=3000, **KINDS[request.param]))
    _, encode = fast.fast_encoder(tok)

    def reference(texts):
        return fast.flat_ids([e.ids for e in tok.encode_batch(texts, add_special_tokens=False)])

    return encode, reference


def test_long_runs_without_long_tokens(long_runs) -> None:
    """Runs of one character and of random letters of several scripts, at and past the
    run limit (tokie chunked pre-tokens of about 10 KB), with and without a long token."""
    encode, reference = long_runs
    if isinstance(encode, proven.Guarded):
        assert encode.longest_run == proven.LONG_RUN
    rng = random.Random(0)
    alphabets = [
        "é",
        "=",
        "-",
        "한",
        "の",
        "中",
        " ",
        "\u3000",
        "a",
        "1",
        "éa",
        "한국어",
        "の中文",
        "ab",
    ]
    texts = []
    for alphabet in alphabets:
        for n in (63, 64, 200, 255, 256, 1023, 1024, 3400, 12_000):
            texts.append("".join(rng.choice(alphabet) for _ in range(n)))
            texts.append(f"x {texts[-1]} y")
    assert not differing(encode, reference, texts)


# Every ASCII punctuation mark and space, the letters of English contractions and a few more.
TRIGRAM_CHARS = (
    "\t\n\r " + "".join(map(chr, range(0x21, 0x30))) + ":;<=>?@[\\]^_`{|}~" + "asStmdlrveAZ019"
)


def test_every_three_ascii_characters(encoders) -> None:
    _, encode, reference = encoders
    texts = [f"x{''.join(t)}y" for t in itertools.product(TRIGRAM_CHARS, repeat=3)]
    for i in range(0, len(texts), 50_000):
        assert not differing(encode, reference, texts[i : i + 50_000])


def test_real_text_in_many_languages(encoders, catalogs) -> None:
    """Whole catalogs and their sentences, as `cloze shard` encodes them."""
    _, encode, reference = encoders
    for language, text in catalogs.items():
        paragraphs = text.split("\n\n")
        documents = ["\n\n".join(paragraphs[i : i + 20]) for i in range(0, len(paragraphs), 20)]
        sentences = [s for d in documents for s in split_sentences(d, language.split("_")[0])]
        for texts in (documents, sentences, paragraphs):
            assert not differing(encode, reference, texts), language


def test_real_documents_in_nine_scripts(encoders) -> None:
    _, encode, reference = encoders
    sentences = [s for d in DOCUMENTS for s in split_sentences(d, "en")]
    assert not differing(encode, reference, DOCUMENTS + sentences)


_WORDS = "the don make Hello über naïve 한국어 문서를 日本語 中文 Москва ελληνικά שלום مرحبا हिन्दी ไทย".split()  # noqa: SIM905, E501
_SPACES = [" ", "  ", "\t", "\n", "\r\n", "\t\t", " \t", "\u00a0", "\u3000", "\u2009"]
_SPACES += ["\x0b", "\x0c", "\x85", "\u2028"]
_QUOTES = ["'", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "n't", '"', "’", "‘", "«", "»", "「"]
_fragments = st.one_of(
    st.sampled_from(_WORDS),
    st.sampled_from(_SPACES),
    st.sampled_from(_QUOTES),
    st.tuples(st.characters(), st.integers(1, 300)).map(lambda cn: cn[0] * cn[1]),
    st.characters(categories=["Mn", "Mc", "Me"]),
    st.characters(categories=["Cc", "Cf", "Zs", "Zl", "Zp"]),
    st.characters(categories=["Cn", "Co"]),
    st.text(max_size=8),
)
_texts = st.lists(_fragments, max_size=24).map("".join)


@settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(texts=st.lists(_texts, min_size=1, max_size=8))
@example(texts=["a\t's b", "\t'make", "é" * 128, "=" * 10_000, "word \uffff word", "a\u061db"])
@example(texts=["x'<S>'y", "＜ｓ＞ <MASK> [mask] <UNK>", "a\u2e43b \U0002b820"])
@example(texts=["\u0300" + "0" * 110, "\u0301000000", "\u0300" + "0" * 9])
def test_generated_text(encoders, texts) -> None:
    _, encode, reference = encoders
    got, want = encode(texts), reference(texts)
    assert np.array_equal(got[1], want[1]) and np.array_equal(got[0], want[0]), texts
