"""Where Gopher's alphabetic-word rule sits in other languages (issue 36, item 2): measured on
the same documentation in English and in translation.

    python bench/clean/calibrate.py

Gopher drops a document when fewer than 80% of its words have a letter. Punctuation and
symbols count as words, so the share depends on how a language is cut into words and how
it punctuates: Japanese, cut by MeCab into particles and stems, has more words with a
letter per mark than English; German, with its compounds and a comma before every
subordinate clause, fewer. The same text translated should meet the rule alike, so each
language's threshold is English's moved by the median, over translated sections, of (the
translation's share - the English section's share): what `corpus/text/filters/languages.py`
holds as `ALPHA_WORDS_SHIFT`.

The sections are those of the Debian FAQ (`apt install debian-faq debian-faq-de
debian-faq-fr debian-faq-it debian-faq-ja debian-faq-ko debian-faq-nl debian-faq-pt
debian-faq-ru debian-faq-zh-cn`) and the Debian Developer's Reference (`developers-reference
developers-reference-de -fr -it -ja -ru`), second-level sections matched across languages
by their anchor, taken when py3langid names the translation's language with a score of 0.9
or more and both sides have Gopher's 50 words. Not the Debian Reference, which
bench/clean/languages.py judges the result on, so the threshold is not fitted to the
documents it is judged by.
"""

from __future__ import annotations

import os
from pathlib import Path

import lxml.html
import numpy as np

from clozeworks.corpus.text.filters.language import load_backend
from clozeworks.corpus.text.filters.languages import settings_for, words_of
from clozeworks.corpus.text.filters.text import (
    content_words,
    count_numeric_words,
    count_symbols,
    token_counts,
)
from clozeworks.corpus.text.normalize import normalize_text

FAQ = Path("/usr/share/doc/debian/FAQ")
DEVREF = Path("/usr/share/developers-reference")
# language directory -> ISO 639-1 code
LANGUAGES = {
    "de": "de", "fr": "fr", "it": "it", "nl": "nl", "pt": "pt", "ru": "ru",
    "ja": "ja", "zh-cn": "zh", "ko": "ko",
}  # fmt: skip
MIN_WORDS = 50  # Gopher's own minimum: shorter English sections never reach the rule
ENGLISH_THRESHOLD = 0.8  # Gopher's min_alpha_words_ratio


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


def faq_sections(lang: str | None) -> dict[str, str]:
    pages = sorted(FAQ.glob("*.en.html")) if lang is None else sorted((FAQ / lang).glob("*.html"))
    return docbook_sections(pages, "faq:")


def devref_sections(lang: str | None) -> dict[str, str]:
    root = DEVREF if lang is None else DEVREF / lang
    out = {}
    for page in sorted(root.glob("*.html")):
        tree = lxml.html.fromstring(page.read_bytes())
        for section in tree.xpath("//section[@id][./h2]"):
            for nested in section.xpath(".//section"):
                nested.drop_tree()  # a subsection is not the section's own text
            out[f"devref:{section.get('id')}"] = _blocks_text(section)
    return out


def counts(text: str, code: str) -> tuple[float, int] | None:
    """(Gopher's share of words with a letter, its count of words) as GopherQualityFilter
    counts them for `code`; None below English's 50 words."""
    settings = settings_for(code)
    tokens = words_of(text, settings)
    if tokens is None:
        content, symbols, numeric = (
            content_words(text), count_symbols(text), count_numeric_words(text)
        )  # fmt: skip
    else:
        content, symbols, numeric = token_counts(tokens)
    if not content:
        return None
    return (len(content) - numeric) / (len(content) + symbols), len(content)


def main() -> None:
    langid = load_backend("langid")
    english = {**faq_sections(None), **devref_sections(None)}
    print(f"load {os.getloadavg()[0]:.2f}\n")
    print("| language | sections | English below 0.8 | threshold at that share | shift | words "
          "per English word |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for lang, code in LANGUAGES.items():
        translated = faq_sections(lang)
        if (DEVREF / lang).is_dir():
            translated |= devref_sections(lang)
        pairs = []
        for key, text in translated.items():
            if key not in english:
                continue
            found, score = langid.predict(text)
            if found != code or score < 0.9:
                continue
            ours, theirs = counts(english[key], "en"), counts(text, code)
            if ours is not None and theirs is not None and ours[1] >= MIN_WORDS:
                pairs.append((*ours, *theirs))
        if not pairs:
            continue
        en_share, en_words, share, words = np.array(pairs).T
        # The threshold that drops as many translated sections as 0.8 drops English ones
        # (quantile matching, as FineWeb-2 sets its per-language thresholds).
        below = float(np.mean(en_share < ENGLISH_THRESHOLD))
        threshold = float(np.quantile(share, below))
        ratio = float(np.median(words / en_words))
        print(f"| {code} | {len(pairs)} | {below:.1%} | {threshold:.3f} | "
              f"{threshold - ENGLISH_THRESHOLD:+.3f} | {ratio:.2f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
