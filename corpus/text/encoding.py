"""The encoding of a web page's bytes, in the order the WHATWG HTML standard sniffs it.

1. a byte order mark;
2. the charset the transport gave (a WARC record's HTTP `Content-Type`);
3. a `<meta charset>` or `<meta http-equiv="Content-Type">` in the first 1024 bytes (the
   prescan; Resiliparse's, which skips comments; a UTF-16 declared there means UTF-8, as
   the standard says, since the prescan read it as ASCII);
4. UTF-8 where the bytes are valid UTF-8 (a cut last character aside): detection guessed
   Greek or Thai for a quarter of real Korean UTF-8 pages that declared nothing;
5. Resiliparse's detection (uchardet).
Labels are mapped as the WHATWG Encoding Standard maps them (`latin1` is windows-1252,
`ks_c_5601-1987` is EUC-KR), and each encoding is decoded with the Python codec that
decodes as the standard's decoder does: the standard's EUC-KR is windows-949, its GBK is
GB18030, its Shift_JIS is windows-31J and its Big5 is Big5-HKSCS, each a superset of what
its label names (Python's `euc_kr` refuses the Hangul windows-949 adds).
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator

BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
)
PRESCAN_BYTES = 1024
# WHATWG encoding (Resiliparse's name for it) -> the Python codec decoding as its decoder.
DECODERS = {"euc_kr": "cp949", "gbk": "gb18030", "shift_jis": "cp932", "big5": "big5hkscs"}
# Bytes that could make the detector name an encoding where the prescan found no <meta>:
# everything past ASCII, and ESC (ISO-2022's escapes).
_NOT_PRESCAN = bytes(range(256)).maketrans(bytes([0x1B, *range(0x80, 0x100)]), b" " * (1 + 0x80))


def _mapped(label: str | None) -> str | None:
    """The codec for an encoding label: the WHATWG mapping, else Python's own name for it
    (`cp949`), else None (`text/html`, `uft-8`, a NUL: what servers send)."""
    from resiliparse.parse.encoding import map_encoding_to_html5

    if not label:
        return None
    name = map_encoding_to_html5(label, fallback_utf8=False)
    if name is None:
        try:
            name = codecs.lookup(label).name
        except (LookupError, ValueError):
            return None
    return DECODERS.get(name, name)


def meta_charset(body: bytes) -> str | None:
    """The codec a `<meta>` in the first PRESCAN_BYTES declares, or None."""
    from resiliparse.parse.encoding import detect_encoding

    head = body[:PRESCAN_BYTES].translate(_NOT_PRESCAN)
    # Without a <meta>, the detector sees ASCII alone and says so.
    found = detect_encoding(head, html5_compatible=False, from_html_meta=True)
    if found is None or found == "ascii":
        return None
    name = DECODERS.get(found, found)
    return "utf-8" if name.startswith("utf-16") else name


def is_utf8(body: bytes) -> bool:
    """Valid UTF-8 but perhaps for a last character cut short (a truncated record)."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(body, final=False)
    except UnicodeDecodeError:
        return False
    return True


def detected(body: bytes) -> str:
    """Resiliparse's guess (uchardet), as a decoding codec."""
    from resiliparse.parse.encoding import detect_encoding

    # Unmapped first: uchardet names windows-949 `cp949`, which is no WHATWG label.
    return _mapped(detect_encoding(body, html5_compatible=False)) or "utf-8"


def page_encoding(body: bytes, charset: str | None) -> tuple[str, str]:
    """(codec, how it was found: bom, transport, meta, utf-8 or detected)."""
    for bom, name in BOMS:
        if body.startswith(bom):
            return name, "bom"
    transport = _mapped(charset)
    if transport is not None:
        return transport, "transport"
    meta = meta_charset(body)
    if meta is not None:
        return meta, "meta"
    if is_utf8(body):
        return "utf-8", "utf-8"
    return detected(body), "detected"


def decode_page(body: bytes, charset: str | None) -> str:
    """A page's text in the encoding `page_encoding` finds. Where those bytes do not decode
    in it (a page that declares what it is not), UTF-8, then the detected encoding, then
    windows-1252; failing all, the first with the bad bytes replaced."""
    from resiliparse.parse.encoding import bytes_to_str

    name, how = page_encoding(body, charset)
    fallbacks = ["utf-8"] if how == "detected" else _fallbacks(body)
    return str(bytes_to_str(body, name, fallback_encodings=fallbacks))


def _fallbacks(body: bytes) -> Iterator[str]:
    """UTF-8, the detected codec (only guessed if UTF-8 failed too), windows-1252."""
    yield "utf-8"
    yield detected(body)
    yield "cp1252"
