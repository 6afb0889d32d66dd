"""Debian's documentation in English and in translation, as documents for the language
benches (calibrate.py, languages.py): each second-level section of a manual is one
document, keyed by its anchor so that a translation's section meets its English original.

| manual | packages | translations |
|---|---|---|
| `faq` | debian-faq, debian-faq-LANG | de fr it ja ko nl pt ru zh-cn |
| `devref` | developers-reference, developers-reference-LANG | de fr it ja ru |
| `reference` | debian-reference-en, debian-reference-LANG | de ja zh-cn |
| `guide` | maint-guide, maint-guide-LANG | de fr ja ru |

A section's text is its paragraphs and list items, each one line with the source's line
wrapping undone, as an extractor gives them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import lxml.html

from clozeworks.corpus.text.filters.language import load_backend
from clozeworks.corpus.text.normalize import normalize_text

FAQ = Path("/usr/share/doc/debian/FAQ")
DEVREF = Path("/usr/share/developers-reference")
REFERENCE = Path("/usr/share/debian-reference")
GUIDE = Path("/usr/share/doc")
# A translation's directory or file suffix (the packages' own names) -> ISO 639-1 code.
CODES = {
    "en": "en", "de": "de", "fr": "fr", "it": "it", "nl": "nl", "pt": "pt", "ru": "ru",
    "ja": "ja", "zh-cn": "zh", "ko": "ko",
}  # fmt: skip


def _blocks_text(node: lxml.html.HtmlElement) -> str:
    """Paragraphs and list items, each one line with the source's wrapping undone."""
    blocks = node.xpath(".//p | .//li[not(.//p)]")
    return normalize_text("\n".join(" ".join(b.text_content().split()) for b in blocks))


def docbook_sections(pages: list[Path], prefix: str = "") -> dict[str, str]:
    """Anchor -> text of every second-level section of DocBook HTML pages (the Debian
    Reference, FAQ and New Maintainers' Guide are built alike)."""
    out = {}
    for page in pages:
        tree = lxml.html.fromstring(page.read_bytes())
        for div in tree.xpath('//div[@class="section"][.//h2[@class="title"]]'):
            anchors = div.xpath('.//h2[@class="title"]/a/@id')
            text = _blocks_text(div) if anchors else ""
            if text:
                out[f"{prefix}{anchors[0]}"] = text
    return out


def faq_sections(lang: str) -> dict[str, str]:
    pages = sorted(FAQ.glob("*.en.html")) if lang == "en" else sorted((FAQ / lang).glob("*.html"))
    return docbook_sections(pages, "faq:")


def devref_sections(lang: str) -> dict[str, str]:
    root = DEVREF if lang == "en" else DEVREF / lang
    out = {}
    for page in sorted(root.glob("*.html")):
        tree = lxml.html.fromstring(page.read_bytes())
        for section in tree.xpath("//section[@id][./h2]"):
            for nested in section.xpath(".//section"):
                nested.drop_tree()  # a subsection is not the section's own text
            out[f"devref:{section.get('id')}"] = _blocks_text(section)
    return out


def reference_sections(lang: str) -> dict[str, str]:
    return docbook_sections(sorted(REFERENCE.glob(f"*.{lang}.html")), "reference:")


def guide_sections(lang: str) -> dict[str, str]:
    where = GUIDE / "maint-guide" if lang == "en" else GUIDE / f"maint-guide-{lang}"
    return docbook_sections(sorted((where / "html").glob(f"*.{lang}.html")), "guide:")


MANUALS: dict[str, Callable[[str], dict[str, str]]] = {
    "faq": faq_sections,
    "devref": devref_sections,
    "reference": reference_sections,
    "guide": guide_sections,
}


def translated(manual: str, lang: str) -> dict[str, str]:
    """The sections of `manual` in `lang` (a package's name for it) that py3langid names
    as that language with a score of 0.9 or more: fully translated (commands and file
    names stay English in every translation), and in English, mostly prose."""
    texts = MANUALS[manual](lang)
    langid = load_backend("langid")
    keep = {}
    for key, text in texts.items():
        found, score = langid.predict(text)
        if found == CODES[lang] and score >= 0.9:
            keep[key] = text
    return keep


def in_every_language(manual: str, langs: list[str]) -> tuple[dict[str, dict[str, str]], list[str]]:
    """(lang -> sections, the keys fully translated into every one of `langs`)."""
    texts = {lang: translated(manual, lang) for lang in langs}
    return texts, sorted(set.intersection(*(set(t) for t in texts.values())))
