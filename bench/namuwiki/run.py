"""NamuWiki dumps: our reader's MB/s and peak memory on a generated dump of a gigabyte or
more, beside a plain `json.load` of the same file (issue 54, item 4).

    python bench/namuwiki/run.py --work /tmp/namu [--gigabytes 1.0]

No dump can be downloaded here, so one is written from real Korean text: the manual pages
Debian installs in Korean (/usr/share/man/ko, rendered with `man`), their paragraphs drawn
at random into pages of a few KB whose namumark has what a NamuWiki article has (a table of
contents macro, headings, bold runs, links with and without labels and anchors, footnotes
holding links, a table, lists, a folding box, a file link, a category), with redirects and
pages of other namespaces among them, as one compact JSON array (`[{"namespace": "0",
"title": ..., "text": ..., "contributors": [...]}, ...]`), as NamuWiki publishes it.

Each contender runs in its own process under GNU time -v, back to back: our reader over the
whole file (pages cut apart and parsed one at a time, namumark rendered), the same without
rendering (the cutting and parsing alone), and `json.load` of the file (the whole array in
memory; nothing rendered). Figures: MB/s of the dump and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def korean_paragraphs() -> list[str]:
    out = []
    for page in sorted(Path("/usr/share/man/ko").rglob("*.gz")):
        env = {**os.environ, "MANWIDTH": "1000", "LANG": "C.UTF-8"}
        done = subprocess.run(["man", "-l", str(page)], capture_output=True, text=True, env=env)
        for block in re.split(r"\n\s*\n", done.stdout):
            text = " ".join(block.split())
            if sum("\uac00" <= c <= "\ud7a3" for c in text) >= 20:
                out.append(text)
    if not out:
        raise SystemExit("no Korean manual pages under /usr/share/man/ko (apt install manpages-ko)")
    return out


def page_text(rng: random.Random, paragraphs: list[str], title: str) -> str:
    def para() -> str:
        words = rng.choice(paragraphs).split()
        at = rng.randrange(len(words))
        words[at] = f"[[{words[at]}]]"
        at = rng.randrange(len(words))
        words[at] = f"[[{words[at]}#s-1|'''{words[at]}''']]"
        return " ".join(words) + f"[* 출처: [[{rng.choice(paragraphs).split()[0]}]] 참고.]"

    parts = ["[목차]", f"'''{title}'''은(는) {para()}", "== 개요 ==", para(), para()]
    parts += ["|| 항목 || 값 ||", f"|| {title} || {rng.randrange(1000)} ||", "== 특징 =="]
    parts += [f" * {para()}" for _ in range(rng.randrange(1, 4))]
    parts += ["{{{#!folding [ 펼치기 · 접기 ]", para() + "}}}", "[[파일:그림.png|width=300]]"]
    parts += [para() for _ in range(rng.randrange(2, 6))]
    parts.append(f"[[분류:{rng.choice(paragraphs).split()[0]}]]")
    return "\n".join(parts)


def write_dump(path: Path, gigabytes: float, seed: int = 0) -> tuple[int, int]:
    """(pages, bytes) of a generated dump of at least `gigabytes`."""
    rng = random.Random(seed)
    paragraphs = korean_paragraphs()
    target = int(gigabytes * 1e9)
    size = pages = 0
    with path.open("wb") as f:
        f.write(b"[")
        while size < target:
            kind = rng.random()
            title = f"문서 {pages}"
            if kind < 0.1:
                page = {"namespace": "0", "title": title, "text": f"#redirect 문서 {pages - 1}"}
            elif kind < 0.15:
                page = {
                    "namespace": "1",
                    "title": f"틀:{title}",
                    "text": para_only(rng, paragraphs),
                }
            else:
                page = {"namespace": "0", "title": title, "text": page_text(rng, paragraphs, title)}
            page["contributors"] = [f"user{rng.randrange(10000)}" for _ in range(3)]
            data = json.dumps(page, ensure_ascii=False, separators=(",", ":")).encode()
            f.write((b"," if pages else b"") + data)
            size += len(data) + 1
            pages += 1
        f.write(b"]")
    return pages, path.stat().st_size


def para_only(rng: random.Random, paragraphs: list[str]) -> str:
    return rng.choice(paragraphs)


CONTENDERS = {
    "clozeworks reader (pages parsed, namumark rendered)": "ours",
    "clozeworks reader, cutting and parsing only": "parse",
    "json.load of the whole file": "json",
}


def contend(kind: str, path: str) -> None:
    """Run one contender in this process (the child GNU time measures)."""
    sys.path.insert(0, str(ROOT))
    if kind == "json":
        with open(path, "rb") as f:
            pages = json.load(f)
        print(len(pages))
        return
    from clozeworks.corpus.text import namuwiki
    from clozeworks.corpus.text.records import ReadOptions

    if kind == "parse":
        namuwiki.render = lambda text: text  # the reader's own cut and parse, nothing drawn
    with open(path, "rb") as f:
        print(sum(1 for _ in namuwiki.read_namuwiki(f, path, ReadOptions())))


def measured(kind: str, path: str) -> tuple[float, float, str]:
    """(seconds, peak RSS in MB, what it printed) of one contender under GNU time -v."""
    start = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-v", sys.executable, __file__, "--contend", kind, path],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    assert rss, done.stderr
    return seconds, int(rss.group(1)) / 1024, done.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/namu"))
    parser.add_argument("--gigabytes", type=float, default=1.0)
    parser.add_argument("--contend", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.contend:
        contend(*args.contend)
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    dump = args.work / "namuwiki_bench.json"
    if not dump.exists() or dump.stat().st_size < args.gigabytes * 1e9:
        pages, size = write_dump(dump, args.gigabytes)
        print(f"wrote {pages:,} pages, {size / 1e6:,.0f} MB -> {dump}")
    size = dump.stat().st_size
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    print(f"{'contender':<55} {'MB/s':>7} {'peak RSS MB':>12}  output")
    for name, kind in CONTENDERS.items():
        seconds, rss, out = measured(kind, str(dump))
        print(f"{name:<55} {size / 1e6 / seconds:>7.1f} {rss:>12,.0f}  {out}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
