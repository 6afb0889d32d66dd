"""Web pages are decoded in the encoding the WHATWG standard sniffs: BOM, the server's
charset, `<meta>`, valid UTF-8, then detection. Real text (Debian's gettext catalogs) in
Korean, Japanese, Chinese, Russian and Greek, in UTF-8 and in each language's legacy
encodings, declared in `<meta>` only, by the server only, or not at all, comes back
exactly, through the decoder and through `cloze clean` on HTML files and WARC records."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from clozeworks.cli import main
from clozeworks.corpus.text.encoding import decode_page, page_encoding
from tests.corpus.catalogs import catalog_messages

pytest.importorskip("resiliparse")

# language -> the encodings its pages are met in
ENCODINGS = {
    "ko": ["utf-8", "cp949"],
    "ja": ["utf-8", "shift_jis", "euc-jp"],
    "zh_CN": ["utf-8", "gb18030"],
    "zh_TW": ["utf-8", "big5"],
    "ru": ["utf-8", "koi8-r", "cp1251"],
    "el": ["utf-8", "iso-8859-7"],
}
LABELS = {"cp949": "euc-kr", "gb18030": "gb2312"}  # what pages declare for these


def paragraphs(language: str, encoding: str) -> list[str]:
    """Messages of 20 to 300 characters that the encoding can write, without markup."""
    out = []
    for m in catalog_messages(language, 60_000):
        m = " ".join(m.split())
        if 20 <= len(m) <= 300 and not set(m) & set("<>&%\\{}") and _writes(encoding, m):
            out.append(m)
    return out[:40]


def _writes(encoding: str, text: str) -> bool:
    try:
        return text.encode(encoding).decode(encoding) == text
    except UnicodeError:
        return False


def html(language: str, texts: list[str], head: str = "") -> str:
    body = "".join(f"<p>{t}</p>" for t in texts)
    return f"<html lang='{language}'><head>{head}<title>T</title></head><body><article>{body}</article></body></html>"  # noqa: E501


CASES = [(lang, enc) for lang, encodings in ENCODINGS.items() for enc in encodings]


@pytest.mark.parametrize(("language", "encoding"), CASES)
def test_declared_in_meta_by_the_server_or_not_at_all(language, encoding) -> None:
    texts = paragraphs(language, encoding)
    assert len(texts) >= 20, f"too few {language} messages in the catalogs"
    label = LABELS.get(encoding, encoding)
    declared = {
        "meta": (f'<meta charset="{label}">', None),
        "http-equiv": (
            f'<meta http-equiv="Content-Type" content="text/html; charset={label}">',
            None,
        ),
        "transport": ("", label),
        "nothing": ("", None),
    }
    for how, (head, charset) in declared.items():
        page = html(language, texts, head).encode(encoding)
        text = decode_page(page, charset)
        assert all(t in text for t in texts), (how, page_encoding(page, charset))


def test_valid_utf8_is_utf8_before_any_guess() -> None:
    texts = paragraphs("ko", "utf-8")[:3]  # short pages are where detection guessed Greek
    for n in range(1, 4):
        page = html("ko", texts[:n]).encode()
        assert page_encoding(page, None) == ("utf-8", "utf-8")
        # a record cut inside its last character is still UTF-8
        assert page_encoding(page[: page.index(texts[0][-1].encode()) + 1], None)[0] == "utf-8"


def test_the_sniffing_order() -> None:
    ko = paragraphs("ko", "cp949")
    page = html("ko", ko, '<meta charset="euc-kr">').encode("cp949")
    assert page_encoding(page, None) == ("cp949", "meta")
    assert page_encoding(page, "EUC-KR") == ("cp949", "transport")
    assert page_encoding(page, "text/html") == ("cp949", "meta")  # not a charset: ignored
    assert page_encoding(b"\xef\xbb\xbf" + page, "euc-kr") == ("utf-8", "bom")
    # a meta in a comment is no declaration; UTF-16 declared in a meta means UTF-8
    assert page_encoding(b'<!-- <meta charset="koi8-r"> --><p>x</p>', None)[1] != "meta"
    assert page_encoding(b'<meta charset="utf-16"><p>x</p>', None) == ("utf-8", "meta")
    assert page_encoding(b"<meta charset=latin1><p>caf\xe9</p>", None) == ("cp1252", "meta")


def test_a_page_that_declares_what_it_is_not_is_still_read() -> None:
    ko = paragraphs("ko", "cp949")
    page = html("ko", ko, '<meta charset="utf-8">').encode("cp949")
    assert all(t in decode_page(page, None) for t in ko)
    page = html("ko", ko, '<meta charset="euc-kr">').encode("utf-8")
    assert all(t in decode_page(page, None) for t in ko)


def test_clean_reads_html_files_and_warc_records_exactly(tmp_path) -> None:
    pytest.importorskip("warcio")
    from tests.corpus.text.test_web import write_warc

    crawl = tmp_path / "crawl"
    crawl.mkdir()
    expected = {}
    records = []
    for i, (language, encoding) in enumerate(CASES):
        texts = paragraphs(language, encoding)[:12]
        head = "" if i % 2 else f'<meta charset="{LABELS.get(encoding, encoding)}">'
        page = html(language, texts, head).encode(encoding)
        (crawl / f"{i:02d}-{language}-{encoding}.html").write_bytes(page)
        expected[f"crawl/{i:02d}-{language}-{encoding}.html#1"] = texts
        url = f"https://example.org/{i}"
        records.append(("response", url, "text/html", page, "200 OK", {}))
    write_warc(crawl / "pages.warc.gz", records)
    out = tmp_path / "docs"
    argv = ["clean", "--input", str(crawl), "--output", str(out), "--no-progress"]
    assert main(argv) == 0
    rows = {r["id"]: r["text"] for r in pq.read_table(out).to_pylist()}
    for i, key in enumerate(expected):
        warc_key = f"crawl/pages.warc.gz#{i + 2}"  # after the warcinfo record
        for where in (key, warc_key):
            assert all(t in rows[where] for t in expected[key]), where
    stats = json.loads((out / ".stats.json").read_text())
    assert stats["documents_out"] == 2 * len(CASES)


@pytest.mark.parametrize("language", ["ko", "ja", "zh_CN", "el", "he"])
def test_short_utf8_pages_are_never_mojibake(language) -> None:
    """Detection alone read short UTF-8 pages as Greek, Thai or Latin-1 (of these
    catalogs' messages as pages, some in every one of these languages, most in Hebrew)."""
    messages = {" ".join(m.split()) for m in catalog_messages(language, 100_000)}
    pages = [m for m in sorted(messages) if not m.isascii() and not set(m) & set("<>&")]
    assert len(pages) > 500
    wrong = [m for m in pages if decode_page(f"<p>{m}</p>".encode(), None) != f"<p>{m}</p>"]
    assert not wrong, wrong[:3]
