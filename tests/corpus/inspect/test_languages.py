"""`cloze inspect` of a store shows the languages its clean stage identified and the main
script of its documents, documents and bytes of each, and warns where the languages are not
the ones asked for (Korean pages decoded wrongly come out Greek)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from clozeworks.cli import main
from clozeworks.corpus.inspect.languages import ScriptTally, language_warnings
from clozeworks.corpus.vocab.scripts import main_script, script_of
from tests.conftest import write_jsonl

KOREAN = "서울은 한국의 수도이며 인구가 가장 많은 도시이다. 한강이 도시를 가로질러 흐른다."
# The same sentence's UTF-8 bytes read as ISO-8859-7 (Greek), as a wrong guess decodes it.
MOJIBAKE = KOREAN.encode("utf-8").decode("iso-8859-7", errors="replace")


def test_main_script_agrees_with_the_word_by_word_count() -> None:
    for text in (KOREAN, MOJIBAKE, "plain English text", "日本語のテキスト", "12 + 30 = 42"):
        assert main_script(text) == script_of(text)
    tally = ScriptTally()
    tally.add([KOREAN, KOREAN, MOJIBAKE, "42"])
    assert tally.summary() == {
        "Hangul": {"documents": 2, "bytes": 2 * len(KOREAN.encode())},
        "Greek": {"documents": 1, "bytes": len(MOJIBAKE.encode())},
        "none": {"documents": 1, "bytes": 2},
    }


def test_no_warning_when_nothing_was_asked_or_few_differ() -> None:
    languages = {"ko": {"documents": 199, "bytes": 1}, "el": {"documents": 1, "bytes": 1}}
    assert language_warnings(languages, []) == []
    assert language_warnings(languages, ["ko"]) == []  # 0.5%, under the 1% that warns
    languages["und"] = {"documents": 50, "bytes": 1}
    assert language_warnings(languages, ["ko"]) == []  # undetermined is no language


def test_inspect_of_a_store_shows_languages_scripts_and_warns(tmp_path, capsys) -> None:
    records = [{"text": KOREAN + f" {i}번째 문서."} for i in range(6)]
    # Pages that declare their language, decoded wrongly: Greek letters, said to be Greek.
    records += [{"text": MOJIBAKE + f" {i}", "language": "el"} for i in range(3)]
    write_jsonl(tmp_path / "raw" / "a.jsonl", records)
    store = tmp_path / "docs"
    argv = ["clean", "--input", str(tmp_path / "raw"), "--output", str(store), "--no-progress"]
    assert main([*argv, "--language", "ko", "--meta-fields", "language"]) == 0
    capsys.readouterr()
    assert main(["inspect", str(store), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    rows = pq.read_table(store).to_pylist()  # as cleaned: C1 controls of the mojibake gone
    greek = sum(len(r["text"].encode()) for r in rows if "el" in r["meta"])
    korean = sum(len(r["text"].encode()) for r in rows) - greek
    assert summary["languages"] == {
        "ko": {"documents": 6, "bytes": korean},
        "el": {"documents": 3, "bytes": greek},
    }
    assert summary["languages_asked"] == ["ko"]
    assert summary["scripts"] == {
        "Hangul": {"documents": 6, "bytes": korean},
        "Greek": {"documents": 3, "bytes": greek},
    }
    (warning,) = summary["warnings"]
    assert warning.startswith(
        "3 of 9 documents were identified as languages not asked for (ko): el 3"
    )
    assert main(["inspect", str(store)]) == 0
    text = capsys.readouterr().out
    assert "languages  ko 6 docs" in text and "scripts    Hangul 6 docs" in text
    assert "mojibake" in text


@pytest.mark.parametrize("stage", ["clean", "dedup"])
def test_languages_of_a_store_made_before_bytes_were_counted(tmp_path, capsys, stage) -> None:
    from tests.corpus.inspect.test_stages import write_store

    clean = {"stage": "clean", "documents_in": 1, "documents_out": 1,
             "languages": {"en": {"documents": 1}}}  # fmt: skip
    stats = clean if stage == "clean" else {"stage": "dedup", "documents_in": 1,
                                            "documents_out": 1, "upstream": clean}  # fmt: skip
    write_store(tmp_path / "s", ["text"], stats)
    assert main(["inspect", str(tmp_path / "s"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["languages"] == {"en": {"documents": 1, "bytes": 0}}
    assert summary["warnings"] == []
