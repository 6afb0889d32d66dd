"""Wikipedia dumps: our reader against wikiextractor on the same dump (issue 35, item 5).

    python bench/wiki/run.py --work /tmp/wiki [--articles 20000]

No dump can be downloaded here, so one is written from real text: Python's reST
documentation (python3.11-doc), each page an article whose wikitext has every construct a
Wikipedia article has (an infobox template, bold and italic runs, links with and without
anchors, references, headings, lists, a table, a file link, categories, an interlanguage
link), laid out as MediaWiki's export writes it (one tag a line, `<text bytes=...
xml:space="preserve">`), with redirects and talk pages among the articles, compressed as
Wikipedia's -multistream dumps are (a bz2 stream every 100 pages). Runs, back to back: our
reader in this process, `cloze clean` end to end with 1 and 2 worker processes, and
wikiextractor with 1 (its default on 2 cores) and 2 processes. Figures are MB/s of
uncompressed XML and the agreement of the text per article: the share of each one's
paragraphs (after whitespace is collapsed) that the other has word for word.

Needs `pip install -r bench/requirements.txt` (wikiextractor; not a dependency of
clozeworks).
"""

from __future__ import annotations

import argparse
import bz2
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from xml.sax.saxutils import escape

RST = Path("/usr/share/doc/python3.11/html/_sources")


def wikitext(rst: str, rng: random.Random) -> tuple[str, str]:
    """(title, wikitext) of an article written from one reST page."""
    lines = rst.splitlines()
    title = next((line.strip("*` ") for line in lines if line.strip() and line[0].isalpha()), "X")
    out = [f"{{{{Infobox software|name={title}|developer=Python Software Foundation}}}}"]
    paragraph: list[str] = []

    def flush() -> None:
        if not paragraph:
            return
        words = " ".join(paragraph).split()
        for k in range(0, len(words), 7):  # links, some with anchors
            if rng.random() < 0.3 and words[k].isalpha():
                words[k] = f"[[{words[k]}]]" if rng.random() < 0.5 else f"[[Page {k}|{words[k]}]]"
        text = " ".join(words)
        text = re.sub(r"``([^`]+)``", r"''\1''", text)
        text = re.sub(r"\*\*([^*]+)\*\*", r"'''\1'''", text)
        if rng.random() < 0.5:
            text = text.replace(". ", ".<ref>{{cite web|url=https://docs.python.org}}</ref> ", 1)
        out.append(text)
        out.append("")
        paragraph.clear()

    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if nxt and set(nxt.strip()) <= set("=-~^*") and len(nxt.strip()) >= 3 and line.strip():
            flush()
            out.append(f"== {line.strip()} ==")
            continue
        if set(line.strip()) <= set("=-~^*") and line.strip():
            continue
        if line.startswith(("* ", "- ")):
            flush()
            out.append("* " + line[2:].strip())
        elif line.startswith(".. ") or line.startswith("   "):
            flush()  # directives and code blocks: left out of the article
        elif not line.strip():
            flush()
        else:
            paragraph.append(line.strip())
    flush()
    out.append('{| class="wikitable"\n! Name !! Value\n|-\n| a || 1\n|}')
    out.append(f"[[File:{title}.png|thumb|The {title} module]]")
    out.append(f"[[Category:Python]]\n[[de:{title}]]")
    return title, "\n".join(out)


def page_xml(page_id: int, title: str, text: str, ns: int = 0, redirect: str = "") -> str:
    # An attribute value: its double quotes escaped too.
    red = f'    <redirect title="{escape(redirect, {chr(34): "&quot;"})}" />\n' if redirect else ""
    return (
        f"  <page>\n    <title>{escape(title)}</title>\n    <ns>{ns}</ns>\n"
        f"    <id>{page_id}</id>\n{red}    <revision>\n      <id>{page_id + 10**6}</id>\n"
        f"      <model>wikitext</model>\n      <format>text/x-wiki</format>\n"
        f'      <text bytes="{len(text.encode())}" xml:space="preserve">{escape(text)}</text>\n'
        "    </revision>\n  </page>\n"
    )


def make_dump(path: Path, articles: int) -> tuple[int, int]:
    rng = random.Random(34)
    sources = sorted(p for p in RST.rglob("*.rst.txt") if p.stat().st_size > 3000)
    header = (
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" '
        'xml:lang="en">\n  <siteinfo>\n    <sitename>Wikipedia</sitename>\n'
        '    <namespaces>\n      <namespace key="0" case="first-letter" />\n'
        '      <namespace key="1" case="first-letter">Talk</namespace>\n'
        "    </namespaces>\n  </siteinfo>\n"
    )
    size = 0
    # As Wikipedia's -multistream dumps: the header, then 100 pages a bz2 stream, then the
    # closing tag (the file readers without an index read as one stream).
    with open(path, "wb") as f:
        f.write(bz2.compress(header.encode()))
        page_id, stream = 1, []
        for i in range(articles):
            source = sources[i % len(sources)]
            title, text = wikitext(source.read_text(errors="replace"), rng)
            title = f"{title} {i}"
            page = page_xml(page_id, title, text)
            if i % 20 == 0:
                page += page_xml(page_id + 1, f"Alias {i}", f"#REDIRECT [[{title}]]", 0, title)
                page += page_xml(page_id + 2, f"Talk:{title}", "A talk page.", ns=1)
            stream.append(page)
            size += len(page.encode())
            page_id += 3
            if len(stream) == 100 or i == articles - 1:
                f.write(bz2.compress("".join(stream).encode()))
                stream = []
        f.write(bz2.compress(b"</mediawiki>\n"))
    return articles, size


def ours(dump: Path) -> tuple[dict[str, list[str]], float]:
    from clozeworks.corpus.text.wiki import read_mediawiki_streams

    out: dict[str, list[str]] = {}
    started = time.perf_counter()
    with open(dump, "rb") as f:
        for doc in read_mediawiki_streams(f, "dump", None, 0, None):
            if hasattr(doc, "text"):
                out[json.loads(doc.meta)["title"]] = doc.text.split("\n")
    return out, time.perf_counter() - started


def clean(dump: Path, work: Path, workers: int) -> tuple[float, int]:
    """`cloze clean` end to end (the Beam pipeline, Parquet out, its default filter: the
    length of at least one character): seconds, and the documents written."""
    import pyarrow.parquet as pq

    target = work / f"clean-{workers}"
    started = time.perf_counter()
    subprocess.run(
        [str(Path(sys.executable).parent / "cloze"), "clean", "--input", str(dump.parent),
         "--output", str(target), "--no-progress",
         "--direct_num_workers", str(workers), "--direct_running_mode", "multi_processing"],
        check=True,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    return elapsed, sum(pq.read_metadata(part).num_rows for part in target.glob("*.parquet"))


def wikiextractor(dump: Path, work: Path, processes: int = 1) -> tuple[dict[str, list[str]], float]:
    target = work / f"wikiextractor-{processes}"
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "wikiextractor.WikiExtractor", str(dump), "-o", str(target),
         "--json", "--processes", str(processes), "-q"],
        check=True,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    out: dict[str, list[str]] = {}
    for part in sorted(target.rglob("wiki_*")):
        for line in part.read_text().splitlines():
            row = json.loads(line)
            paragraphs = [p for p in row["text"].split("\n") if p.strip()]
            out[row["title"]] = paragraphs[1:] if paragraphs[:1] == [row["title"]] else paragraphs
    return out, elapsed


def agreement(a: dict[str, list[str]], b: dict[str, list[str]], loose: bool = False) -> float:
    """Of `a`'s paragraphs in articles both have, the share `b` has word for word; `loose`:
    ignoring spaces and double quotes (wikiextractor writes italics as "quoted" text and
    drops the space after bold text)."""

    def norm(p: str) -> str:
        return re.sub(r'[\s"]', "", p) if loose else " ".join(p.split())

    shared = same = 0
    for title in a.keys() & b.keys():
        theirs = {norm(p) for p in b[title]}
        for p in a[title]:
            shared += 1
            same += norm(p) in theirs
    return same / max(1, shared)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--articles", type=int, default=3000)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    dump = args.work / "dump" / "enwiki-bench-pages-articles-multistream.xml.bz2"
    dump.parent.mkdir(exist_ok=True)
    articles, size = make_dump(dump, args.articles)
    mb = size / 1e6
    packed = dump.stat().st_size / 1e6
    load = os.getloadavg()[0]
    print(f"dump: {articles} articles (+5% redirects, +5% talk pages), {mb:.1f} MB of XML, "
          f"{packed:.1f} MB bz2; load average {load:.2f}")  # fmt: skip
    mine, t_ours = ours(dump)
    theirs, t_wx = wikiextractor(dump, args.work)
    _, t_wx2 = wikiextractor(dump, args.work, processes=2)
    t_clean1, kept1 = clean(dump, args.work, 1)
    t_clean2, kept2 = clean(dump, args.work, 2)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    rows = [
        ("clozeworks reader, in process", len(mine), t_ours),
        ("cloze clean, 1 worker", kept1, t_clean1),
        ("cloze clean, 2 workers", kept2, t_clean2),
        ("wikiextractor --processes 1 (its default here)", len(theirs), t_wx),
        ("wikiextractor --processes 2", len(theirs), t_wx2),
    ]
    for name, count, seconds in rows:
        print(f"{name:48} {count:6} articles {mb / seconds:6.2f} MB/s ({seconds:.1f} s)")
    for loose in (False, True):
        how = "ignoring spaces and quotes" if loose else "word for word"
        print(f"{how}: our paragraphs it has {agreement(mine, theirs, loose):.3f}, "
              f"its paragraphs we have {agreement(theirs, mine, loose):.3f}")  # fmt: skip
    title = sorted(mine.keys() & theirs.keys())[0]
    print(f"\nexample, {title!r}:\n  ours: {mine[title][:2]}\n  theirs: {theirs[title][:2]}")


if __name__ == "__main__":
    main()
