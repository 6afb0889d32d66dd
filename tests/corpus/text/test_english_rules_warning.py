"""No silent English default: when Gopher's or C4's rules judge documents by English's
settings for want of a language and most of their letters are not Latin, `clean` says so
on stderr with the share and the flag to pass, and `.stats.json` records it."""

from __future__ import annotations

import json
from pathlib import Path

from clozeworks.cli import main
from clozeworks.corpus.text.scripts import non_latin_script
from tests.conftest import write_jsonl
from tests.corpus.text.test_languages import ENGLISH_DOC, JAPANESE, KOREAN

DOCUMENTS = Path(__file__).parent / "documents"


def test_the_script_of_real_documents() -> None:
    found = {
        name: non_latin_script((DOCUMENTS / f"{name}.txt").read_text())
        for name in ("korean", "japanese", "chinese", "russian", "arabic", "prose-en", "man-ls")
    }
    assert found == {
        "korean": "Hangul",
        "japanese": "Kana",
        "chinese": "Han",
        "russian": "Cyrillic",
        "arabic": "Arabic",
        "prose-en": None,
        "man-ls": None,
    }
    assert non_latin_script("") is None
    assert non_latin_script("12345 !!! ...") is None
    # Half Latin is Latin enough: English's rules are not wrong for it.
    assert non_latin_script("abcd 가나다라") is None
    assert non_latin_script("abc 가나다라") == "Hangul"
    # Only the first characters are read.
    assert non_latin_script("x" * 5000 + "가" * 5000) is None


def _clean(tmp_path: Path, name: str, texts: list[str], *flags: str) -> tuple[dict, str]:
    raw = tmp_path / f"raw-{name}"
    write_jsonl(raw / "a.jsonl", [{"text": t} for t in texts])
    out = tmp_path / name
    argv = ["clean", "--input", str(raw), "--output", str(out), "--no-progress", *flags]
    assert main(argv) == 0
    return json.loads((out / ".stats.json").read_text()), str(out)


def test_korean_under_english_rules_is_said_and_recorded(tmp_path, capsys) -> None:
    korean = [KOREAN, KOREAN.replace("서울", "부산"), KOREAN.replace("봄", "가을")]
    stats, _ = _clean(tmp_path, "ko", [*korean, ENGLISH_DOC], "--filters", "gopher")
    err = capsys.readouterr().err
    rules = stats["english_rules"]
    assert rules["documents"] == 4 and rules["not_latin"] == 3, rules
    assert rules["scripts"] == {"Hangul": 3}
    assert "3 of 4 documents (75%)" in err and "--language ko" in err, err
    assert err.count("\n") == 1 and rules["warning"] in err
    # Said once, the way the corpus would be cleaned right: with its language.
    stats, _ = _clean(tmp_path, "ko-said", korean, "--filters", "gopher", "--language", "ko")
    assert stats["english_rules"] == {
        "documents": 0,
        "not_latin": 0,
        "scripts": {},
        "warning": None,
    }
    assert "English's rules" not in capsys.readouterr().err


def test_several_scripts_ask_for_a_code_or_the_language_filter(tmp_path, capsys) -> None:
    stats, _ = _clean(tmp_path, "mixed", [KOREAN, JAPANESE, ENGLISH_DOC], "--filters", "c4")
    err = capsys.readouterr().err
    assert stats["english_rules"]["scripts"] == {"Hangul": 1, "Kana": 1}
    assert "--language CODE" in err and "--filters language" in err, err


def test_nothing_is_said_where_english_rules_fit_or_no_rule_depends_on_language(
    tmp_path, capsys
) -> None:
    stats, _ = _clean(tmp_path, "en", [ENGLISH_DOC] * 3, "--filters", "gopher")
    assert stats["english_rules"]["not_latin"] == 0
    # The length filter has no language: no document is judged by English's rules.
    stats, _ = _clean(tmp_path, "len", [KOREAN] * 3, "--filters", "length")
    assert stats["english_rules"]["documents"] == 0
    assert stats["english_rules"]["warning"] is None
    assert "English's rules" not in capsys.readouterr().err


def test_a_few_quoted_lines_are_counted_not_said(tmp_path, capsys) -> None:
    texts = [ENGLISH_DOC.replace("Some", f"Some {i}") for i in range(20)] + [KOREAN]
    stats, _ = _clean(tmp_path, "few", texts, "--filters", "gopher")
    assert stats["english_rules"]["not_latin"] == 1
    assert stats["english_rules"]["warning"] is None  # 1 of 21 is under 5%
    assert "English's rules" not in capsys.readouterr().err
