"""Realistic documents at any size, from text that ships with Debian and Python.

Paragraphs come from Python's reST documentation sources (`apt-get install
python3.11-doc`: /usr/share/doc/python3.11/html/_sources), the copyright files every
Debian package installs (/usr/share/doc/*/copyright) and man pages (/usr/share/man, roff
markup stripped). A document is a run of 4 to 16 paragraphs drawn from several source
files, a few words swapped in each, so documents are several KB of real prose and no two
are near-duplicates (they share a paragraph now and then, as web pages share boilerplate).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
from collections.abc import Iterator
from pathlib import Path

SOURCES = (
    ("/usr/share/doc/python3.11/html/_sources", "**/*.rst.txt"),
    ("/usr/share/doc", "*/copyright"),
    ("/usr/share/man", "man[1-8]/*.gz"),
)
_ROFF_ESCAPE = re.compile(r"\\(f[BIRP]|f\(..|\(..|\*\(..|[-&e|^0 ])")


def _roff_text(raw: str) -> str:
    lines = []
    for line in raw.splitlines():
        if line.startswith(('.\\"', "'\\\"")):
            continue
        if line.startswith("."):
            # A macro line: keep the words of .SH/.B/.I headings, drop the rest.
            parts = line.split(None, 1)
            if parts[0] in (".SH", ".SS", ".B", ".I", ".BR", ".IR") and len(parts) > 1:
                lines.append(parts[1].replace('"', ""))
            elif parts[0] in (".PP", ".P", ".LP", ".TP", ".IP"):
                lines.append("")
            continue
        lines.append(line)
    return _ROFF_ESCAPE.sub(lambda m: "-" if m.group(1) == "-" else "", "\n".join(lines))


def _read(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except OSError:
            return ""
        return _roff_text(data.decode("utf-8", "replace"))
    return data.decode("utf-8", "replace")


PARAGRAPHS_ENV = "CLOZEWORKS_BENCH_PARAGRAPHS"


def paragraphs() -> list[str]:
    """Every paragraph of 200 bytes or more from the sources present on this machine, or
    the list saved by `save_paragraphs` where $CLOZEWORKS_BENCH_PARAGRAPHS names one (a
    machine without these sources, such as a lent GPU machine)."""
    saved = os.environ.get(PARAGRAPHS_ENV)
    if saved:
        import zstandard

        return json.loads(zstandard.ZstdDecompressor().decompress(Path(saved).read_bytes()))
    out = []
    for root, pattern in SOURCES:
        for path in sorted(Path(root).glob(pattern)):
            if not path.is_file():
                continue
            for block in re.split(r"\n\s*\n", _read(path)):
                block = block.strip()
                if len(block) >= 200:
                    out.append(block)
    if not out:
        raise SystemExit("no source text found: install python3.11-doc, or run on Debian")
    return out


def save_paragraphs(path: Path, every: int = 2) -> int:
    """Every `every`-th paragraph as zstd-compressed JSON, for `paragraphs()` elsewhere;
    returns how many."""
    import zstandard

    kept = paragraphs()[::every]
    path.write_bytes(zstandard.ZstdCompressor(level=19).compress(json.dumps(kept).encode()))
    return len(kept)


def documents(seed: int = 0) -> Iterator[str]:
    """Endless documents of 4-16 paragraphs each, a few words swapped per paragraph."""
    rng = random.Random(seed)
    pool = paragraphs()
    while True:
        parts = []
        for text in rng.sample(pool, rng.randint(4, 16)):
            words = text.split(" ")
            for _ in range(max(1, len(words) // 25)):
                i = rng.randrange(len(words))
                j = rng.randrange(len(words))
                words[i], words[j] = words[j], words[i]
            parts.append(" ".join(words))
        yield "\n\n".join(parts)


def write_corpus(path: Path, megabytes: float, seed: int = 0, files: int = 1) -> tuple[int, int]:
    """JSON lines (`id`, `text`) until they hold `megabytes` of text; (documents, bytes).
    With `files` > 1 the documents are dealt round-robin into that many files named
    after `path` (corpus-000.jsonl, ...), as a corpus of many files is: a reader of one
    file cannot be split among workers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    limit = int(megabytes * 1_000_000)
    count = size = 0
    names = [path] if files == 1 else [
        path.with_name(f"{path.stem}-{i:03d}{path.suffix}") for i in range(files)
    ]  # fmt: skip
    outs = [open(name, "w", encoding="utf-8") for name in names]  # noqa: SIM115
    try:
        for text in documents(seed):
            line = json.dumps({"id": f"doc-{count:09d}", "text": text}) + "\n"
            outs[count % files].write(line)
            count += 1
            size += len(text.encode("utf-8"))
            if size >= limit:
                break
    finally:
        for f in outs:
            f.close()
    return count, size
