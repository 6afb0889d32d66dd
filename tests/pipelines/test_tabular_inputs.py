"""Issue 35, item 3: `cloze clean` reads Arrow IPC (what `datasets.save_to_disk` writes,
and the file format) and CSV / TSV, with `--text-field`, ids, meta and bad input as for
every other format."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from clozeworks.cli import main

datasets = pytest.importorskip("datasets")

TEXTS = [f"Document number {i}, with a comma, and\na line break in it." for i in range(40)]


def _rows(store: Path) -> dict[str, dict]:
    return {r["id"]: r for r in pq.read_table(store).to_pylist()}


def _clean(tmp_path: Path, capsys, *argv: str) -> tuple[int, dict, str]:
    out = tmp_path / "docs"
    code = main(["clean", "--output", str(out), "--no-progress", *argv])
    err = capsys.readouterr().err
    stats = json.loads((out / ".stats.json").read_text()) if code == 0 else {}
    return code, stats, err


def test_a_saved_dataset_is_read_with_its_ids_and_meta(tmp_path, capsys) -> None:
    ds = datasets.Dataset.from_dict(
        {"body": TEXTS, "key": [f"k{i}" for i in range(40)], "label": [i % 3 for i in range(40)]}
    )
    ds.save_to_disk(str(tmp_path / "saved"), num_shards=2)
    assert sorted(p.name for p in (tmp_path / "saved").iterdir())[-2:] == [
        "dataset_info.json",
        "state.json",
    ]
    code, stats, err = _clean(
        tmp_path, capsys, "--input", str(tmp_path / "saved"), "--text-field", "body",
        "--id-field", "key", "--meta-fields", "label",
    )  # fmt: skip
    assert code == 0, err
    assert stats["documents_in"] == stats["documents_out"] == 40  # the .json sidecars skipped
    rows = _rows(tmp_path / "docs")
    assert rows["k7"]["text"] == TEXTS[7] and json.loads(rows["k7"]["meta"]) == {"label": 1}


def test_the_arrow_file_format_too(tmp_path, capsys) -> None:
    table = pa.table({"text": TEXTS[:5]})
    (tmp_path / "raw").mkdir()
    with ipc.new_file(tmp_path / "raw" / "t.arrow", table.schema) as writer:
        writer.write_table(table)
    code, _, err = _clean(tmp_path, capsys, "--input", str(tmp_path / "raw"))
    assert code == 0, err
    assert sorted(_rows(tmp_path / "docs")) == [f"raw/t.arrow#{i}" for i in range(1, 6)]


def test_a_damaged_arrow_file_is_one_line(tmp_path, capsys) -> None:
    table = pa.table({"text": TEXTS})
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=10):
            writer.write_batch(batch)
    data = sink.getvalue().to_pybytes()
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "cut.arrow").write_bytes(data[: len(data) // 2])
    code, _, err = _clean(tmp_path, capsys, "--input", str(tmp_path / "raw"))
    assert code == 2 and err.count("\n") == 1, err
    assert "raw/cut.arrow" in err and "Traceback" not in err
    assert not (tmp_path / "docs" / ".stats.json").exists()


def test_csv_and_tsv_with_quotes_line_breaks_and_bad_rows(tmp_path, capsys) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    lines = ["id,text,lang"] + [f'c{i},"{t}",en' for i, t in enumerate(TEXTS[:6])]
    lines.append('c6,"' + "x" * 3000 + '",en')  # past --max-record-bytes: too_long
    lines.append("c7,,en")  # empty text
    (raw / "a.csv").write_text("\n".join(lines) + "\n")
    (raw / "b.tsv").write_text("text\tlang\nA tab separated document.\tde\n")
    code, stats, err = _clean(
        tmp_path, capsys, "--input", str(raw), "--meta-fields", "lang",
        "--max-record-bytes", "2000",
    )  # fmt: skip
    assert code == 0, err
    assert stats["documents_in"] == 9 and stats["documents_out"] == 7
    assert stats["dropped.too_long"] == 1 and stats["dropped.empty_text"] == 1
    rows = _rows(tmp_path / "docs")
    assert rows["raw/a.csv#3"]["text"] == TEXTS[2]  # the comma and the line break kept
    assert json.loads(rows["raw/b.tsv#1"]["meta"]) == {"lang": "de"}


def test_a_stray_quote_and_a_quote_never_closed_are_bad_csv(tmp_path, capsys) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    lines = ["id,text", 'c0,"A first document, quoted."', 'c1,"stray"quote', "c2,Plain text."]
    lines += ['c3,"This quote never closes.', "c4,Swallowed by it.", "c5,And this."]
    (raw / "a.csv").write_text("\n".join(lines) + "\n")
    code, stats, err = _clean(tmp_path, capsys, "--input", str(raw))
    assert code == 0, err
    # The open quote takes the rest of the file with it: one record, counted, not kept.
    assert stats["dropped.bad_csv"] == 2 and stats["documents_out"] == 2, stats
    assert sorted(row["text"] for row in _rows(tmp_path / "docs").values()) == [
        "A first document, quoted.",
        "Plain text.",
    ]


def test_a_csv_without_the_text_column_names_its_columns(tmp_path, capsys) -> None:
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "a.csv").write_text("id,content\n1,hello there\n")
    code, _, err = _clean(tmp_path, capsys, "--input", str(tmp_path / "raw"))
    assert code == 2
    assert err.strip() == ("cloze clean: error: raw/a.csv: no column 'text' (columns: id, content)")
