"""Every script through the tokenizer (issue 36, item 1): uncased lowercases and strips the
accents BERT meant (Latin, Greek, Cyrillic) and leaves every other script as it came in
(NFC); vocab_stats.json's figures per script."""

from __future__ import annotations

import unicodedata

import pytest

from clozeworks.corpus.vocab.scripts import script_of
from clozeworks.corpus.vocab.stats import heldout_stats
from clozeworks.corpus.vocab.train import VocabConfig, train_tokenizer

# A sentence a script, written for the test; each is in NFC, as `cloze clean` writes text.
TEXTS = {
    "Latin": "Les élèves étudient à l'école; Việt Nam; Ångström und Straße.",
    "Greek": "Η γλώσσα είναι ελληνική, με τόνους και διαλυτικά: ϊ ΐ.",
    "Cyrillic": "Ёжик пошёл в лес, и йогурт стоял на столе.",
    "Hangul": "언어모델은 대규모 말뭉치로 훈련됩니다.",
    "Kana": "がぎぐげご、パピプペポ、ヴァイオリンを弾きます。",
    "Han": "中文字符与日本語の漢字。",
    "Devanagari": "हिन्दी भाषा में क्षत्रिय और ज्ञान।",
    "Thai": "ภาษาไทยมีวรรณยุกต์และสระที่ซับซ้อน",
    "Arabic": "اللُّغَةُ العَرَبِيَّةُ جميلة.",
    "Hebrew": "עִבְרִית היא שפה שמית.",
}
# What uncased must do to each: only the first three scripts lose their marks.
STRIPPED = {"Latin", "Greek", "Cyrillic"}


@pytest.fixture(scope="module")
def tokenizers() -> dict[bool, object]:
    corpus = [text for _ in range(20) for text in TEXTS.values()]
    return {
        cased: train_tokenizer(corpus, VocabConfig(kind="wordpiece", vocab_size=600, cased=cased))
        for cased in (False, True)
    }


def _squeeze(text: str) -> str:
    return "".join(text.split())


@pytest.mark.parametrize("script", sorted(TEXTS))
@pytest.mark.parametrize("cased", [False, True])
def test_decoding_gives_back_the_normalized_text(tokenizers, script, cased) -> None:
    tok = tokenizers[cased]
    text = TEXTS[script]
    normalized = tok.normalizer.normalize_str(text)
    assert normalized == unicodedata.normalize("NFC", normalized)
    ids = tok.encode(text, add_special_tokens=False).ids
    assert tok.token_to_id("[UNK]") not in ids
    # WordPiece's decoder joins pieces and spaces words: equal but for spaces.
    assert _squeeze(tok.decode(ids)) == _squeeze(normalized)
    expected = text if cased else text.lower()
    if not cased and script in STRIPPED:
        bare = unicodedata.normalize("NFD", expected)
        expected = unicodedata.normalize(
            "NFC", "".join(c for c in bare if not unicodedata.combining(c))
        )
    assert _squeeze(normalized) == _squeeze(expected), script


def test_the_marks_of_other_scripts_survive_uncased(tokenizers) -> None:
    norm = tokenizers[False].normalizer.normalize_str
    assert norm("훈련") == "훈련"  # not conjoining jamo
    assert norm("が") == "が" and norm("パ") == "パ"  # the dakuten and handakuten kept
    assert norm("हिन्दी") == "हिन्दी"  # virama and vowel signs kept
    assert norm("Ёжик Café Ά") == "ежик cafe α"


def test_words_are_counted_under_their_script() -> None:
    assert script_of("훈련됩니다.") == "Hangul" and script_of("がぎ") == "Kana"
    assert script_of("漢字") == "Han" and script_of("Straße") == "Latin"
    assert script_of("ｶﾀｶﾅ") == "Kana" and script_of("Ｌａｔｉｎ") == "Latin"
    assert script_of("1234,") is None and script_of("x") == "Latin"


def test_heldout_figures_per_script(tokenizers) -> None:
    tok = tokenizers[False]
    mixed = [f"{TEXTS['Latin']} {TEXTS['Hangul']} 2024", TEXTS["Hangul"]]
    stats = heldout_stats(tok, [mixed], tok.token_to_id("[UNK]")).summary()
    by_script = stats["by_script"]
    assert list(by_script) == ["Latin", "Hangul"]  # most words first
    hangul_words = 2 * len(TEXTS["Hangul"].split())
    assert by_script["Hangul"]["words"] == hangul_words
    assert by_script["Latin"]["words"] == len(TEXTS["Latin"].split())
    assert by_script["Hangul"]["unk_rate"] == 0.0
    total = sum(s["words"] for s in by_script.values())
    assert total == stats["words"] - 1  # "2024" has no letters
