"""Which script a document's letters are written in, and the language that script most
likely means: enough to tell a user that English filter settings met a Korean corpus.

Gopher's and C4's rules are English's when no language is known (filters/languages.py);
on Korean pages they drop about twice the share they drop of the same pages in English,
on Japanese all of them. `clean` counts the documents filtered that way whose letters are
mostly not Latin, by script, and says which `--language` to pass.
"""

from __future__ import annotations

import re

# The first characters of a document decide: a page's script does not change halfway,
# and the count must stay cheap beside the filters it runs next to.
SAMPLE_CHARS = 4096
# Script -> (its letters as a character class, the language to suggest or None where one
# script serves many languages and only the language filter can tell).
SCRIPTS: dict[str, tuple[str, str | None]] = {
    "Hangul": ("\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7a3\ud7b0-\ud7ff", "ko"),
    "Kana": ("\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9d", "ja"),
    "Han": ("\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff", "zh"),
    "Cyrillic": ("\u0400-\u052f", None),
    "Greek": ("\u0370-\u03ff\u1f00-\u1fff", "el"),
    "Arabic": ("\u0600-\u06ff\u0750-\u077f", None),
    "Hebrew": ("\u0590-\u05ff", "he"),
    "Devanagari": ("\u0900-\u097f", None),
    "Thai": ("\u0e00-\u0e7f", "th"),
}
_LATIN = re.compile("[A-Za-z\u00c0-\u024f\u1e00-\u1eff\uff21-\uff3a\uff41-\uff5a]")
_LETTER = re.compile(r"[^\W\d_]")
_SCRIPT = {name: re.compile(f"[{chars}]") for name, (chars, _) in SCRIPTS.items()}
# Japanese is written in kana and Han together; Chinese has no kana.
KANA_IN_JAPANESE = 0.1


def non_latin_script(text: str) -> str | None:
    """The script most of `text`'s letters are in (its first SAMPLE_CHARS characters), or
    None where Latin letters are at least half of them or there are none; "other" for a
    script not in SCRIPTS."""
    sample = text[:SAMPLE_CHARS]
    letters = len(_LETTER.findall(sample))
    if not letters or 2 * len(_LATIN.findall(sample)) >= letters:
        return None
    counts = {name: len(pattern.findall(sample)) for name, pattern in _SCRIPT.items()}
    if counts["Kana"] > KANA_IN_JAPANESE * (counts["Kana"] + counts["Han"]):
        counts["Kana"] += counts.pop("Han")
    name, most = max(counts.items(), key=lambda kv: kv[1])
    return name if most else "other"


def language_of_script(script: str) -> str | None:
    """The ISO 639-1 code to suggest for a script, None where it names no one language."""
    return SCRIPTS.get(script, ("", None))[1]
