"""Filters follow the document's language (issue 36, item 2): English's rules for English,
no English-only rule for a language without settings, no word counts where words have no
spaces between them; `.stats.json` says which settings each language got."""

from __future__ import annotations

import importlib.util
import json
import re

import pyarrow.parquet as pq
import pytest

from clozeworks.cli import main
from clozeworks.corpus.text.filters import build_filters
from clozeworks.corpus.text.filters.base import apply_filters
from clozeworks.corpus.text.filters.gopher import GopherRepetitionFilter, _word_ids, top_ngram_chars
from clozeworks.corpus.text.filters.languages import (
    ENGLISH,
    FALLBACK,
    settings_for,
    settings_report,
    words_of,
)
from clozeworks.corpus.text.filters.text import split_words
from tests.conftest import write_jsonl

# Written for the test: Korean prose with spaces between words (no English stop words).
KOREAN = (
    "언어 모델은 많은 문서를 읽고 다음에 올 낱말을 예측하도록 훈련됩니다. 이렇게 훈련된 모델은 "
    "문장의 뜻을 이해하는 데 쓰입니다. 한국어 문서는 띄어쓰기가 있어서 낱말을 셀 수 있습니다. "
    "그러나 영어의 기능어는 한국어 문서에 나오지 않습니다. 그래서 영어 규칙으로 거르면 좋은 "
    "문서도 버려집니다. 이 시험은 그런 문서가 살아남는지 확인합니다. 문서마다 언어가 다르면 "
    "규칙도 달라야 합니다. 우리는 말뭉치를 정리할 때 이 점을 꼭 기억해야 합니다. 서울의 "
    "도서관에는 오래된 책과 새로운 잡지가 함께 놓여 있습니다. 학생들은 주말마다 그곳에 모여 "
    "함께 공부하고 서로의 생각을 나눕니다. 봄이 오면 공원에는 꽃이 피고 사람들이 산책을 "
    "즐깁니다. 날씨가 좋은 날에는 강가를 따라 자전거를 타는 가족도 많습니다."
)
# Japanese prose: no spaces; sentences end in 。
JAPANESE = "\n".join(
    [
        "言語モデルは大量の文書を読んで次の単語を予測するように訓練されます。",
        "日本語の文書には単語の間に空白がありません。",
        "そのため英語の規則で単語を数えると一つの長い単語に見えます。",
        "この試験はそのような文書が残ることを確かめます。",
    ]
)
ENGLISH_DOC = (
    "The model reads a great many documents and learns to predict the word that comes "
    "next. It is trained for weeks on machines that have many processors, and the text "
    "that it sees has to be clean. That is why the corpus is filtered with rules that were "
    "written for English pages, which is what most of the web was when they were made. "
    "Some pages are lists of links, others are menus or cookie notices, and a few are "
    "simply the same sentence again and again. Each rule removes one kind of such page, "
    "and together they keep the prose that people wrote for other people to read."
)


def _verdict(text: str, names: str, language: str | None) -> str:
    result = apply_filters(text, build_filters(names.split(",")), language)
    return "kept" if result.keep else str(result.reason)


def test_korean_is_not_dropped_by_english_rules() -> None:
    # English's rules: Korean words are short, and have no English stop words.
    assert _verdict(KOREAN, "gopher-quality", None) == "gopher-quality.short_words"
    assert _verdict(KOREAN, "gopher", "ko") == "kept"
    korean = settings_for("ko")
    assert settings_for("en-US") is ENGLISH
    assert (korean.stop_words, korean.word_length_scale) == (None, None)
    assert korean.alpha_words_shift < 0  # bench/clean/calibrate.py, on Korean manual pages


def test_japanese_lines_end_in_its_own_full_stop() -> None:
    assert _verdict(JAPANESE, "c4", None) == "c4.too_few_sentences"
    assert _verdict(JAPANESE, "c4,gopher", "ja") == "kept"
    kept = apply_filters(JAPANESE, build_filters(["c4"]), "ja").text
    assert kept == JAPANESE  # every line ends in 。 and none is cut for having no spaces


def test_english_gets_the_papers_rules_whatever_is_said() -> None:
    for language in (None, "en", "en-GB"):
        assert _verdict(ENGLISH_DOC, "c4,gopher", language) == "kept"
    no_stop_words = re.sub(r"\b(the|be|to|of|and|that|have|with)\b", "x", ENGLISH_DOC, flags=re.I)
    assert _verdict(no_stop_words, "gopher-quality", "en") == "gopher-quality.stop_words"
    assert _verdict(no_stop_words, "gopher-quality", "ko") == "kept"  # no Korean list


# Written for the test: German prose.
GERMAN = (
    "Das Modell liest sehr viele Dokumente und lernt, das nächste Wort vorherzusagen. Es wird "
    "wochenlang auf Rechnern trainiert, die viele Prozessoren haben, und der Text, den es "
    "sieht, muss sauber sein. Deshalb wird der Korpus mit Regeln gefiltert, die für englische "
    "Seiten geschrieben wurden, weil das Netz damals vor allem aus ihnen bestand. Manche "
    "Seiten sind Listen von Verweisen, andere sind Menüs oder Hinweise auf Cookies, und einige "
    "wiederholen nur denselben Satz. Jede Regel entfernt eine solche Art von Seite, und "
    "zusammen behalten sie die Prosa, die Menschen für andere Menschen geschrieben haben."
)


def test_wordfreq_measures_a_languages_stop_words_and_word_lengths() -> None:
    pytest.importorskip("wordfreq")
    german = settings_for("de-AT")
    assert german.name == "de" and {"und", "die", "der"} <= german.stop_words
    assert german.word_length_scale is not None and 1.0 < german.word_length_scale < 1.2
    assert settings_for("ko").stop_words is None  # wordfreq counts Korean morphemes, not words
    xhosa = settings_for("xh")  # neither wordfreq nor calibrate.py measured it
    assert xhosa.name == FALLBACK.name and xhosa.sentence_language == "xh"
    assert _verdict(GERMAN, "gopher", "de") == "kept"
    assert _verdict(GERMAN, "gopher-quality", "en") == "gopher-quality.stop_words"
    no_stop_words = re.sub(r"\b(die|der|das|und|in|ist|nicht|ich)\b", "x", GERMAN, flags=re.I)
    assert _verdict(no_stop_words, "gopher-quality", "de") == "gopher-quality.stop_words"


def test_calibrated_word_counts_and_alphabetic_threshold() -> None:
    """bench/clean/calibrate.py's measures: a Korean section has 0.71 words per English
    word (particles join the word before them), so forty Korean words say what about 56
    English ones do, and pass Gopher's 50-word minimum scaled to Korean."""
    korean = settings_for("ko")
    assert 0.6 < korean.word_count_scale < 0.8
    forty = " ".join(KOREAN.split()[:40])
    assert _verdict(forty, "gopher-quality", None) == "gopher-quality.too_few_words"
    assert _verdict(forty, "gopher-quality", "ko") == "kept"
    # Japanese, cut into particles and stems, has more words with a letter per mark.
    assert settings_for("ja").alpha_words_shift > 0 > settings_for("de").alpha_words_shift
    report = settings_report({"ko": 3})["ko"]
    assert report["word_count_scale"] == korean.word_count_scale
    assert report["alpha_words_shift"] == korean.alpha_words_shift


def test_the_identified_language_picks_the_settings_and_stats_say_so(tmp_path) -> None:
    pytest.importorskip("py3langid")
    docs = [KOREAN, ENGLISH_DOC, KOREAN.replace("서울", "부산")]
    write_jsonl(tmp_path / "raw" / "a.jsonl", [{"text": t} for t in docs])
    out = tmp_path / "docs"
    argv = ["clean", "--input", str(tmp_path / "raw"), "--output", str(out), "--no-progress"]
    assert main([*argv, "--filters", "language,gopher", "--language-languages", "ko,en"]) == 0
    stats = json.loads((out / ".stats.json").read_text())
    assert stats["documents_out"] == 3, stats
    languages = stats["languages"]
    assert {code: (v["documents"], v["settings"]) for code, v in languages.items()} == {
        "en": (1, "en"),
        "ko": (2, settings_for("ko").name),
    }
    assert languages["en"]["stop_words"] == sorted(ENGLISH.stop_words)
    assert languages["ko"]["bytes"] == len(docs[0].encode()) + len(docs[2].encode())
    assert languages["ko"]["stop_words"] is None  # Korean words are not wordfreq's
    assert len(pq.read_table(out)) == 3


def test_a_corpus_language_given_on_the_command_line(tmp_path) -> None:
    write_jsonl(
        tmp_path / "raw" / "a.jsonl",
        [{"text": t} for t in (KOREAN, KOREAN.replace("서울", "부산"))],
    )
    for language, kept in (("", 0), ("ko", 2)):
        out = tmp_path / f"docs-{language or 'none'}"
        argv = ["clean", "--input", str(tmp_path / "raw"), "--output", str(out)]
        flags = ["--filters", "gopher", "--no-progress"]
        assert main([*argv, *flags, *(["--language", language] if language else [])]) == 0
        stats = json.loads((out / ".stats.json").read_text())
        assert stats["documents_out"] == kept, stats
        code = language or "und"
        settings = settings_for("ko").name if language else "en"
        assert list(stats["languages"]) == [code]
        assert stats["languages"][code]["documents"] == 2
        assert stats["languages"][code]["settings"] == settings


def test_chinese_and_japanese_words_come_from_their_segmenters() -> None:
    pytest.importorskip("jieba")
    pytest.importorskip("fugashi")
    japanese, chinese = settings_for("ja"), settings_for("zh-CN")
    assert (japanese.segmenter, chinese.segmenter) == ("fugashi", "jieba")
    assert words_of("言語モデルは文書を読みます。", japanese) == [
        "言語", "モデル", "は", "文書", "を", "読み", "ます", "。",
    ]  # fmt: skip
    assert words_of("我们在北京大学学习中文。", chinese) == [
        "我们", "在", "北京大学", "学习", "中文", "。",
    ]  # fmt: skip
    if importlib.util.find_spec("wordfreq") is not None:
        assert "の" in japanese.stop_words and "的" in chinese.stop_words
        # Words of one or two characters are Chinese's, not too short for it.
        assert 0.3 < chinese.word_length_scale < 0.5
    # Words are counted: a line of a dozen words is not 50, and one long run is not one.
    assert _verdict("短い文書です。", "gopher-quality", "ja") == "gopher-quality.too_few_words"
    assert _verdict(JAPANESE, "gopher-quality", "ja") == "kept"
    assert words_of("plain English", ENGLISH) is None  # spaced: the filters split it


def test_commands_inside_chinese_and_japanese_count_as_in_english() -> None:
    """What sits between runs of Chinese or Japanese (commands, paths, Latin words) is cut
    as spaced text is, so a translated page's command lines count as its original's."""
    pytest.importorskip("jieba")
    pytest.importorskip("fugashi")
    japanese, chinese = settings_for("ja"), settings_for("zh")
    command = ["/etc", "/", "apt", "/", "sources.list"]
    assert split_words("/etc/apt/sources.list") == command
    assert words_of("/etc/apt/sources.list を dpkg-buildpackage -us で編集します。", japanese) == [
        *command, "を", "dpkg", "-", "buildpackage", "-us", "で", "編集", "し", "ます", "。",
    ]  # fmt: skip
    assert words_of("运行dpkg-buildpackage -us命令。", chinese) == [
        "运行", "dpkg", "-", "buildpackage", "-us", "命令", "。",
    ]  # fmt: skip


def test_chinese_repeated_ngrams_are_not_charged_for_spaces_it_does_not_write() -> None:
    """Gopher's top n-gram share counts an n-gram's characters with the spaces between its
    words; Chinese writes none, and counting them raised a two-word phrase repeated
    through a short page over the limit."""
    pytest.importorskip("jieba")
    page = "系统会自动处理依赖关系和配置文件。用户可以在终端里查看每个步骤的输出。"
    page += "软件包很快。软件包不难。"
    ids, lengths = _word_ids(words_of(page, settings_for("zh")))
    limit = GopherRepetitionFilter().top_2gram_frac * len(page)
    assert top_ngram_chars(ids, lengths, 2, gap=1) > limit >= top_ngram_chars(ids, lengths, 2, 0)
    assert _verdict(page, "gopher-repetition", "zh") == "kept"


def test_a_language_the_document_declares_picks_its_settings(tmp_path) -> None:
    """A WET record's identified language (ISO 639-3, `kor,eng`), a Content-Language or a
    page's lang travel in meta as `language`; here from JSON lines with --meta-fields."""
    pytest.importorskip("langcodes")  # ISO 639-3 to 639-1, with wordfreq ([languages])
    records = [
        {"text": KOREAN, "language": "kor,eng"},
        {"text": KOREAN.replace("서울", "부산"), "language": "ko-KR"},
        {"text": ENGLISH_DOC, "language": "eng"},
    ]
    write_jsonl(tmp_path / "raw" / "a.jsonl", records)
    out = tmp_path / "docs"
    argv = ["clean", "--input", str(tmp_path / "raw"), "--output", str(out), "--no-progress"]
    assert main([*argv, "--filters", "gopher", "--meta-fields", "language"]) == 0
    stats = json.loads((out / ".stats.json").read_text())
    assert stats["documents_out"] == 3, stats  # English's rules would drop both Korean ones
    assert {code: v["documents"] for code, v in stats["languages"].items()} == {"ko": 2, "en": 1}


def test_a_language_that_is_not_a_code_is_one_line(tmp_path, capsys) -> None:
    write_jsonl(tmp_path / "raw" / "a.jsonl", [{"text": KOREAN}])
    argv = ["clean", "--input", str(tmp_path / "raw"), "--output", str(tmp_path / "docs")]
    assert main([*argv, "--language", "Korean", "--no-progress"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'Korean' is not an ISO 639-1 code" in err[0], err
    assert not (tmp_path / "docs").exists()
