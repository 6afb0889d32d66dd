"""NamuWiki dumps: namumark rendered to plain passages, the JSON array read page by page
in byte ranges that give the same pages wherever they are cut, redirects and other
namespaces counted, and a damaged or misnamed dump one line naming the file."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clozeworks.cli import main
from clozeworks.corpus.text.namumark import render
from clozeworks.corpus.text.namuwiki import read_namuwiki
from clozeworks.corpus.text.readers import plan_page_ranges
from clozeworks.corpus.text.records import RawDocument, ReadOptions
from clozeworks.pipelines.clean import CleanConfig, run_clean

SEOUL = """[목차]
[include(틀:대한민국의 도시)]
== 개요 ==
'''서울특별시'''는 [[대한민국]]의 [[수도(도시)|수도]]이다.[* 1394년 [[조선]]이 [[한양]]으로 \
도읍을 옮겼다.] 인구는 약 950만 명이다.[br]두 번째 줄.
##주석은 보이지 않는다
[[파일:서울.jpg|width=300]]
|| 구분 || 값 ||
|| 인구 || 950만
명 ||
 * 첫 항목 [[한강#s-2|한강]]이 흐른다.
 * 둘째 항목 ~~삭제된 농담~~ 남은 말.
 1. 번호 항목 [[서울 지하철#s-1]]
> 인용문이다.
{{{#!wiki style="border:1px solid"
상자 안의 글이다. {{{+1 큰 글씨}}} 와 {{{#red 빨간 글씨}}}.}}}
{{{#!folding [ 펼치기 · 접기 ]
접힌 글이다.}}}
{{{#!html <b>html</b>}}}
{{{#!syntax python
print("code")}}}
{{{[[링크 아님]] '''굵게 아님'''}}}
[[https://example.com]] [[https://example.com|바깥 링크]] <math>x^2</math>
----
[[분류:대한민국의 도시]]"""


def test_namumark_to_plain_passages() -> None:
    assert render(SEOUL).split("\n") == [
        "서울특별시는 대한민국의 수도이다. 인구는 약 950만 명이다.",
        "두 번째 줄.",
        "첫 항목 한강이 흐른다.",
        "둘째 항목 남은 말.",
        "번호 항목 서울 지하철",
        "인용문이다.",
        "상자 안의 글이다. 큰 글씨 와 빨간 글씨.",
        "접힌 글이다.",
        "[[링크 아님]] '''굵게 아님'''",
        "바깥 링크",
    ]


def test_nesting_and_unclosed_marks_are_text_not_recursion() -> None:
    deep = "[[" * 50_000 + "가" + "]]" * 50_000
    assert render(deep) == "가"
    assert render("{{{" * 50_000 + "나") == "{{{" * 50_000 + "나"
    assert render("앞 [* 각주 [[링크]] [* 안의 각주]] 뒤") == "앞 뒤"
    assert render("열린 [* 각주") == "열린"


def _page(title: str, text: str, namespace: object = "0") -> dict:
    return {"namespace": namespace, "title": title, "text": text, "contributors": ["x"]}


PAGES = [
    _page("서울특별시", SEOUL),
    _page("서울", "#redirect 서울특별시"),
    _page("한양", "#넘겨주기 서울특별시"),
    _page("틀:대한민국의 도시", "틀 본문", "1"),
    _page("빈 문서", "[목차]\n== 개요 =="),
    *[
        _page(f"문서 {i}", f"'''문서 {i}'''는 예시다. 본문 }},{{\\\" 이다.\n" * 20)
        for i in range(30)
    ],
]


def _dump(pages: list[dict], indent: int | None = None) -> bytes:
    return json.dumps(pages, ensure_ascii=False, indent=indent).encode()


def _read(data: bytes, start: int = 0, end: int | None = None) -> list:
    return list(read_namuwiki(io.BytesIO(data), "namu.json", ReadOptions(), start, end))


@pytest.mark.parametrize("indent", [None, 1])
def test_every_cut_into_ranges_reads_the_same_pages(indent) -> None:
    data = _dump(PAGES, indent)
    whole = _read(data)
    assert len(whole) == len(PAGES)
    for cut in range(1, len(data), 97):
        for second in (cut + 500, None):
            parts = _read(data, 0, cut) + _read(data, cut, second)
            if second is not None:
                parts += _read(data, second)
            assert parts == whole, (cut, second)


def test_a_dump_through_clean_in_ranges(tmp_path) -> None:
    data = _dump(PAGES)
    raw = tmp_path / "raw" / "namuwiki_20210301.json"
    raw.parent.mkdir()
    raw.write_bytes(data)
    chunk = -(-len(data) // 5)
    assert len(plan_page_ranges(str(raw), len(data), chunk)) == 5
    config = CleanConfig(inputs=[str(tmp_path / "raw")], output=str(tmp_path / "docs"))
    stats = run_clean(CleanConfig(**{**config.__dict__, "chunk_bytes": chunk}))
    assert stats["formats"] == {"namuwiki": 1}
    assert stats["dropped.redirect"] == 2 and stats["dropped.not_an_article"] == 1
    assert stats["dropped.empty_text"] == 1 and stats["documents_out"] == 31
    rows = {r["id"]: r for r in pq.read_table(tmp_path / "docs").to_pylist()}
    expected = {d.id: d for d in _read(data) if isinstance(d, RawDocument)}
    assert {i.replace("raw/namuwiki_20210301.json#", "namu.json#") for i in rows} == set(expected)
    seoul = rows["raw/namuwiki_20210301.json#서울특별시"]
    assert seoul["text"] == render(SEOUL)
    assert json.loads(seoul["meta"]) == {"title": "서울특별시", "namespace": "0"}


@pytest.mark.parametrize(
    "cut, said",
    [
        (lambda d: d[: len(d) // 2], "breaks off inside the page at byte"),
        (lambda d: d[:-1], "no closing ']'"),
        (lambda d: d.replace(b'"text"', b'"text" x', 3), "broken JSON in the page at byte"),
        (lambda d: b'{"text": "JSON lines"}\n', "not a NamuWiki dump"),
        (lambda d: d.replace(b'"title"', b'"name"', 1), "no string 'title'"),
    ],
)
def test_a_damaged_dump_is_one_line_and_writes_nothing(tmp_path, capsys, cut, said) -> None:
    raw = tmp_path / "raw" / "namuwiki_20210301.json"
    raw.parent.mkdir()
    raw.write_bytes(cut(_dump(PAGES)))
    argv = ["clean", "--input", str(raw.parent), "--output", str(tmp_path / "docs")]
    assert main([*argv, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "namuwiki_20210301.json" in err and said in err, err
    assert not Path(tmp_path / "docs").exists()
