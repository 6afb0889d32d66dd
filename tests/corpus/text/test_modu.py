"""모두의 말뭉치 (NIKL Modu) JSON files and CC-100's text through `cloze clean`: one
document each with its metadata, placed by name; a damaged or misnamed file is one line
naming the file and the document, exit 2, nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clozeworks.cli import main
from tests.env import ROOT, python_path

pytest.importorskip("ijson")

NEWS = {
    "id": "NIRW1900000001",
    "metadata": {"title": "국립국어원 신문 말뭉치 NIRW1900000001", "creator": "국립국어원"},
    "document": [
        {
            "id": "NIRW1900000001.1",
            "metadata": {
                "title": "봄 축제 열려",
                "author": "홍길동",
                "publisher": "한국일보",
                "date": "20190301",
                "topic": "사회",
            },
            "paragraph": [
                {"id": "NIRW1900000001.1.1", "form": "봄 축제가 서울에서 열렸다."},
                {"id": "NIRW1900000001.1.2", "form": "  시민들이 공원에 모였다.  "},
                {"id": "NIRW1900000001.1.3", "form": ""},
            ],
        },
        {
            "id": "NIRW1900000001.2",
            "metadata": {"title": "빈 기사", "date": "20190302"},
            "paragraph": [],
        },
        {"id": "NIRW1900000001.3", "metadata": {}, "sentence": [{"form": "목록이 다르다."}]},
    ],
}
SPOKEN = {
    "id": "SARW1800000001",
    "metadata": {"title": "국립국어원 구어 말뭉치"},
    "document": [
        {
            "id": "SARW1800000001.1",
            "metadata": {
                "title": "일상 대화",
                "speaker": [{"id": "1", "age": "20대"}, {"id": "2", "age": "30대"}],
                "setting": {"relation": "친구"},
            },
            "utterance": [
                {"id": "SARW1800000001.1.1.1", "form": "오늘 뭐 했어?", "speaker_id": "1"},
                {"id": "SARW1800000001.1.1.2", "form": "도서관에 갔어.", "speaker_id": "2"},
            ],
        }
    ],
}


def _write(path: Path, value: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def _clean(inputs: Path, out: Path, *flags: str) -> int:
    return main(["clean", "--input", str(inputs), "--output", str(out), "--no-progress", *flags])


def test_documents_text_ids_and_metadata(tmp_path) -> None:
    _write(tmp_path / "raw" / "NIRW1900000001.json", NEWS)
    _write(tmp_path / "raw" / "spoken" / "SARW1800000001.json", SPOKEN)
    assert _clean(tmp_path / "raw", tmp_path / "docs") == 0
    stats = json.loads((tmp_path / "docs" / ".stats.json").read_text())
    assert stats["formats"] == {"modu": 2}
    assert stats["documents_in"] == 4 and stats["documents_out"] == 2
    assert stats["dropped.empty_text"] == 1 and stats["dropped.missing_text"] == 1
    rows = {r["id"]: r for r in pq.read_table(tmp_path / "docs").to_pylist()}
    news = rows["raw/NIRW1900000001.json#NIRW1900000001.1"]
    assert news["text"] == "봄 축제가 서울에서 열렸다.\n시민들이 공원에 모였다."
    assert json.loads(news["meta"]) == {
        "document_id": "NIRW1900000001.1",
        **NEWS["document"][0]["metadata"],
    }
    talk = rows["raw/spoken/SARW1800000001.json#SARW1800000001.1"]
    assert talk["text"] == "오늘 뭐 했어?\n도서관에 갔어."
    assert json.loads(talk["meta"])["speaker"][1] == {"id": "2", "age": "30대"}


def test_a_cut_file_names_itself_and_the_document_and_writes_nothing(tmp_path, capsys) -> None:
    whole = json.dumps(NEWS, ensure_ascii=False)
    cut = whole[: whole.index("NIRW1900000001.2") + 30]
    raw = tmp_path / "raw" / "NIRW1900000001.json"
    raw.parent.mkdir()
    raw.write_text(cut, encoding="utf-8")
    assert _clean(tmp_path / "raw", tmp_path / "docs") == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert "NIRW1900000001.json" in err and "after document 1 (NIRW1900000001.1)" in err, err
    assert not (tmp_path / "docs").exists()


@pytest.mark.parametrize(
    "content, said",
    [
        ('{"text": "a JSON-lines record"}\n{"text": "another"}\n', "not a 모두의 말뭉치"),
        ('{"document": [{"id": "x", "paragraph": [{"form": "가"}]}, ]}', "after document 1"),
        ('{"document": [' + "[" * 100 + "]" * 100 + "]}", "nested more than 64 deep"),
        ('{"document": [{"id": "x", "paragraph": [{"form": "\xff"}]}]}', "document"),
    ],
)
def test_not_modu_or_broken_json_is_one_line(tmp_path, capsys, content, said) -> None:
    raw = tmp_path / "raw" / "NWRW1800000022.json"
    raw.parent.mkdir()
    raw.write_bytes(content.encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff"))
    assert _clean(tmp_path / "raw", tmp_path / "docs") == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "NWRW1800000022.json" in err and said in err, err
    assert not (tmp_path / "docs").exists()


def test_cc100_documents_are_blank_line_blocks(tmp_path) -> None:
    raw = tmp_path / "raw" / "ko.txt"
    raw.parent.mkdir()
    raw.write_text(
        "첫 문서의 첫 문단이다.\n첫 문서의 둘째 문단이다.\n\n둘째 문서다.\n\n\n셋째 문서다.\n",
        encoding="utf-8",
    )
    assert _clean(tmp_path / "raw", tmp_path / "docs", "--format", "cc100") == 0
    rows = pq.read_table(tmp_path / "docs").to_pylist()
    assert sorted(r["text"] for r in rows) == [
        "둘째 문서다.",
        "셋째 문서다.",
        "첫 문서의 첫 문단이다.\n첫 문서의 둘째 문단이다.",
    ]
    stats = json.loads((tmp_path / "docs" / ".stats.json").read_text())
    assert stats["formats"] == {"cc100": 1}


def test_without_ijson_the_extra_is_named(tmp_path) -> None:
    _write(tmp_path / "raw" / "NIRW1900000001.json", NEWS)
    # A module set to None in sys.modules is one Python cannot import nor find.
    hide = (
        "import sys\n"
        "sys.modules['ijson'] = None\n"
        "from clozeworks.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", hide, "clean", "--input", str(tmp_path / "raw"), "--output",
         str(tmp_path / "docs"), "--no-progress"],
        cwd=ROOT, capture_output=True, text=True, env={"PYTHONPATH": python_path()},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "pip install 'clozeworks[korean]'" in done.stderr
    assert not (tmp_path / "docs").exists()
