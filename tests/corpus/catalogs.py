"""Real text in many languages for the tests: the translations of the gettext catalogs
Debian ships under /usr/share/locale (every program's messages, in its translators'
words)."""

from __future__ import annotations

import gettext
from pathlib import Path

LOCALES = Path("/usr/share/locale")


def catalog_messages(language: str, limit: int) -> list[str]:
    """Translations of `language`'s catalogs, in file and message order, until `limit`
    characters."""
    out: list[str] = []
    size = 0
    for path in sorted((LOCALES / language / "LC_MESSAGES").glob("*.mo")):
        with open(path, "rb") as f:
            try:
                catalog = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
            except (OSError, UnicodeDecodeError):  # a catalog in another charset
                continue
        for key, value in sorted(catalog.items(), key=str):
            if key and value and size < limit:
                out.append(value)
                size += len(value)
    return out


def catalog_text(language: str, limit: int) -> str:
    """`catalog_messages` as paragraphs."""
    return "\n\n".join(catalog_messages(language, limit))
