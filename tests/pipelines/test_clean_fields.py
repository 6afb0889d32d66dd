"""Mixed inputs (issue 34): text and id fields per file, and chosen fields kept in `meta`
through clean and dedup."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clozeworks.cli import main
from clozeworks.corpus.text.fields import FieldRule, meta_of, parse_field_rules
from clozeworks.corpus.text.readers import ReadOptions
from tests.conftest import write_jsonl


def _rows(directory: Path) -> dict[str, dict]:
    rows = pq.read_table(directory).to_pylist()
    return {r["id"]: r for r in rows}


def test_rules_parse_and_match() -> None:
    rules = parse_field_rules("raw/web/*.jsonl:text=content,id=url; raw/*.parquet:id=key")
    assert rules == (
        FieldRule("raw/web/*.jsonl", text="content", id="url"),
        FieldRule("raw/*.parquet", id="key"),
    )
    options = ReadOptions(text_field="body", rules=rules)
    web = options.for_source("raw/web/2024/a.jsonl")  # `*` crosses directories
    assert (web.text_field, web.id_field) == ("content", "url")
    table = options.for_source("raw/t.parquet")
    assert (table.text_field, table.id_field) == ("body", "key")
    assert options.for_source("raw/notes.txt") is options
    for bad in ("text=content", "a.jsonl:body=x", "a.jsonl:text=", "a:text=x,text=y"):
        with pytest.raises(ValueError, match=r"text|KEY"):
            parse_field_rules(bad)


def test_meta_keeps_the_fields_a_record_has() -> None:
    import datetime

    record = {"text": "t", "lang": "ko", "date": datetime.date(2024, 5, 1), "n": None}
    assert json.loads(meta_of(record, ("lang", "date", "n", "absent"))) == {
        "lang": "ko",
        "date": "2024-05-01",
        "n": None,
    }
    assert meta_of(record, ("absent",)) == "{}"


def test_mixed_inputs_clean_with_rules_and_keep_meta(tmp_path, capsys) -> None:
    raw = tmp_path / "raw"
    write_jsonl(
        raw / "web" / "crawl.jsonl",
        [
            {"content": f"web page {i} about things", "url": f"https://e/{i}", "lang": "en"}
            for i in range(4)
        ],
    )
    write_jsonl(
        raw / "news.jsonl",
        [{"text": f"news story {i} today", "label": i % 2, "lang": "de"} for i in range(3)],
    )
    table = pa.table(
        {
            "body": [f"a row of the table {i}" for i in range(2)],
            "label": [7, 8],
            "key": ["k0", "k1"],
        }
    )
    pq.write_table(table, raw / "table.parquet")
    (raw / "notes.txt").write_text("a plain text file, one document\n")
    out = tmp_path / "docs"
    argv = [
        "clean", "--input", str(raw), "--output", str(out), "--no-progress",
        "--fields", "raw/web/*:text=content,id=url;raw/*.parquet:text=body,id=key",
        "--meta-fields", "lang,label",
    ]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    stats = json.loads((out / ".stats.json").read_text())
    assert stats["documents_in"] == stats["documents_out"] == 10
    assert stats["meta_fields"] == {"lang": 7, "label": 5}
    assert stats["fields"] == ["raw/web/*:text=content,id=url", "raw/*.parquet:text=body,id=key"]
    rows = _rows(out)
    assert json.loads(rows["https://e/2"]["meta"]) == {"lang": "en"}
    assert rows["https://e/2"]["text"] == "web page 2 about things"
    assert json.loads(rows["raw/news.jsonl#2"]["meta"]) == {"lang": "de", "label": 1}
    assert json.loads(rows["k1"]["meta"]) == {"label": 8}
    assert rows["raw/notes.txt#1"]["meta"] == "{}"

    # Dedup carries meta on, and takes several stores at once.
    write_jsonl(
        tmp_path / "more" / "b.jsonl",
        [{"text": "news story 0 today", "lang": "fr"}, {"text": "something else entirely"}],
    )
    more = tmp_path / "docs2"
    argv = ["clean", "--input", str(tmp_path / "more"), "--output", str(more), "--no-progress"]
    assert main([*argv, "--meta-fields", "lang"]) == 0
    deduped = tmp_path / "deduped"
    argv = ["dedup", "--input", str(out), "--input", str(more), "--output", str(deduped)]
    assert main([*argv, "--no-progress"]) == 0, capsys.readouterr().err
    stats = json.loads((deduped / ".stats.json").read_text())
    assert stats["documents_in"] == 12 and stats["duplicates"] == 1
    assert stats["documents_out"] == 11
    assert [u["documents_out"] for u in stats["upstreams"]] == [10, 2]
    rows = _rows(deduped)
    # The duplicate pair keeps its smallest id, with that document's own meta.
    assert "raw/news.jsonl#1" not in rows
    assert json.loads(rows["more/b.jsonl#1"]["meta"]) == {"lang": "fr"}
    assert json.loads(rows["raw/news.jsonl#2"]["meta"]) == {"lang": "de", "label": 1}

    # Stores whose ids collide (two inputs both named `raw`): one document per id.
    write_jsonl(tmp_path / "other" / "raw" / "news.jsonl", [{"text": "a different story"}])
    argv = ["clean", "--input", str(tmp_path / "other" / "raw"), "--no-progress"]
    assert main([*argv, "--output", str(tmp_path / "docs3")]) == 0
    argv = ["dedup", "--input", str(out), str(tmp_path / "docs3"), "--no-progress"]
    assert main([*argv, "--output", str(tmp_path / "deduped2")]) == 0
    stats = json.loads((tmp_path / "deduped2" / ".stats.json").read_text())
    assert stats["dropped.duplicate_id"] == 1 and stats["documents_out"] == 10
    # Of the two rows of id raw/news.jsonl#1, the one whose (source, text, meta) sorts first.
    kept = _rows(tmp_path / "deduped2")["raw/news.jsonl#1"]
    assert kept["text"] == "a different story"


def test_a_meta_field_no_record_has_is_said(tmp_path, capsys) -> None:
    write_jsonl(tmp_path / "raw" / "a.jsonl", [{"text": "one document here"}])
    argv = ["clean", "--input", str(tmp_path / "raw"), "--output", str(tmp_path / "d")]
    assert main([*argv, "--meta-fields", "lagn", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "--meta-fields: no record read had 'lagn'" in err
    stats = json.loads((tmp_path / "d" / ".stats.json").read_text())
    assert stats["meta_fields"] == {"lagn": 0}


def test_a_bad_rule_is_one_line(tmp_path, capsys) -> None:
    write_jsonl(tmp_path / "raw" / "a.jsonl", [{"text": "one document here"}])
    argv = ["clean", "--input", str(tmp_path / "raw"), "--output", str(tmp_path / "d")]
    assert main([*argv, "--fields", "raw/*:txt=content"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'txt=content' is not KEY=FIELD" in err
