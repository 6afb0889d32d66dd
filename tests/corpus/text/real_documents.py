"""Real documents of several kinds for the sentence tests (tests/corpus/text/documents/):
Python's reST sources with code blocks, a Debian copyright file, man pages as `man` renders
them, Markdown, English prose, a tab-separated table, and prose in Korean, Japanese, Chinese,
Russian, Arabic, Greek, Hindi and Hebrew; several end without final punctuation. Each also
comes with CRLF line ends, and all of them joined into documents past 10,000 characters:
sentencex segments a long text in chunks of about 10 KB and drops the whitespace where a
chunk ends at a blank line, the case that glued words before issue 38."""

from __future__ import annotations

from pathlib import Path

DIRECTORY = Path(__file__).parent / "documents"
# ISO 639 code by file name prefix; the rest are English.
LANGUAGES = {
    "korean": "ko",
    "japanese": "ja",
    "chinese": "zh",
    "russian": "ru",
    "arabic": "ar",
    "greek-hindi": "el",
}
LONG = 10_000


def files() -> list[tuple[str, str, str]]:
    """(name, language, text) of every file, as written."""
    out = []
    for path in sorted(DIRECTORY.iterdir()):
        language = next((c for p, c in LANGUAGES.items() if path.name.startswith(p)), "en")
        out.append((path.name, language, path.read_text(encoding="utf-8")))
    return out


def documents() -> list[tuple[str, str, str]]:
    """Every file, every file with CRLF line ends, and the files joined by blank lines in
    each rotation of their order until past `LONG` characters (English rules)."""
    base = files()
    out = list(base)
    out += [(f"{name} (CRLF)", lang, text.replace("\n", "\r\n")) for name, lang, text in base]
    texts = [text.strip() for _, _, text in base]
    for start in range(len(texts)):
        joined: list[str] = []
        i = start
        while sum(map(len, joined)) < 3 * LONG:
            joined.append(texts[i % len(texts)])
            i += 1
        out.append((f"all from {base[start][0]}", "en", "\n\n".join(joined)))
    return out
