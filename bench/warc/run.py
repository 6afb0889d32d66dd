"""WARC files: our reader and extractor against datatrove's WarcReader + Trafilatura (issue 35,
items 2 and 5), and the choice of extractor.

    python bench/warc/run.py --work /tmp/warc [--files 4] [--copies 2]

No crawl can be downloaded here, so WARC files are written from real HTML on this machine:
Python's HTML documentation (python3.11-doc, 530 pages) and the HTML that other Debian
packages install under /usr/share/doc, laid out as Common Crawl's are (a warcinfo record,
then per page a request, the response with its HTTP headers, and a metadata record; gzip
per record), with a plain-text page, an image and a 404 among the responses. `--copies`
repeats the pages under other URLs to make the files larger.

Quality: on the Python pages the main text is known (Sphinx writes it as
`<div class="body" role="main">`); each extractor's output is scored against that text as
multisets of words, precision (how much of the output is main text) and recall (how much
of the main text is in the output). Speed: MB/s of uncompressed WARC, each extractor in one
process; then `cloze clean` and datatrove's pipeline (WarcReader, Trafilatura, JsonlWriter,
as FineWeb runs them) on all files with 1 and 2 worker processes each. Agreement: the
share of each one's lines (whitespace collapsed) the other has, per URL.

Needs `pip install -r bench/requirements.txt` (datatrove, warcio, trafilatura,
faust-cchardet, python-magic) and the [web] extra.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

DOCS = Path("/usr/share/doc")
PYTHON_DOCS = DOCS / "python3.11" / "html"


def pages() -> list[tuple[str, bytes]]:
    """(url, html) of every HTML page of a few KB or more under /usr/share/doc."""
    out = []
    for path in sorted(DOCS.rglob("*.html")):
        if not path.is_file() or path.stat().st_size < 3000 or "/_" in str(path):
            continue
        out.append((f"https://docs.example.org/{path.relative_to(DOCS)}", path.read_bytes()))
    return out


def main_text(html: bytes) -> str | None:
    """The text of a Sphinx page's main element, or None when the page has none."""
    import lxml.html

    tree = lxml.html.fromstring(html)
    found = tree.xpath('//div[@role="main"]')
    if not found:
        return None
    for junk in found[0].xpath(".//script|.//style|.//a[@class='headerlink']"):
        junk.drop_tree()
    return " ".join(found[0].text_content().split())


def write_warcs(work: Path, files: int, copies: int) -> tuple[list[Path], int, dict[str, str]]:
    """WARC files as Common Crawl writes them; (paths, uncompressed bytes, url -> main text)."""
    from warcio.warcwriter import WARCWriter

    html_pages = pages()
    truth = {}
    for url, html in html_pages:
        if url.startswith("https://docs.example.org/python3.11/"):
            text = main_text(html)
            if text:
                truth[url] = text
    out_dir = work / "warc"
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"CC-MAIN-bench-{i:05d}.warc.gz" for i in range(files)]
    writers = []
    for path in paths:
        handle = open(path, "wb")  # noqa: SIM115 - closed below
        writer = WARCWriter(handle, gzip=True)
        writer.write_record(writer.create_warcinfo_record(path.name, {"software": "bench"}))
        writers.append((handle, writer))
    odd = [
        ("https://docs.example.org/robots.txt", "text/plain", b"User-agent: *\n", "200 OK"),
        ("https://docs.example.org/logo.png", "image/png", b"\x89PNG\r\n\x1a\n" + bytes(64),
         "200 OK"),
        ("https://docs.example.org/missing.html", "text/html", b"<p>Not found</p>",
         "404 Not Found"),
    ]  # fmt: skip
    n = 0
    for copy in range(copies):
        for url, html in html_pages:
            _, writer = writers[n % files]
            at = url if copy == 0 else f"{url}?copy={copy}"
            _write_page(writer, at, "text/html; charset=utf-8", html, "200 OK")
            n += 1
        for url, media, body, status in odd:
            _write_page(writers[n % files][1], f"{url}?copy={copy}", media, body, status)
            n += 1
    for handle, _ in writers:
        handle.close()
    size = sum(len(gzip.decompress(p.read_bytes())) for p in paths)
    return paths, size, truth


def _write_page(writer, url: str, media: str, body: bytes, status: str) -> None:
    from warcio.statusandheaders import StatusAndHeaders

    request = StatusAndHeaders(f"GET /{url.split('/', 3)[-1]} HTTP/1.1",
                               [("Host", "docs.example.org")], is_http_request=True)  # fmt: skip
    writer.write_record(writer.create_warc_record(url, "request", http_headers=request))
    headers = StatusAndHeaders(status, [("Content-Type", media)], protocol="HTTP/1.1")
    record = writer.create_warc_record(url, "response", payload=io.BytesIO(body),
                                       http_headers=headers)  # fmt: skip
    writer.write_record(record)
    meta = b"fetchTimeMs: 12\r\n"
    fields = "application/warc-fields"
    writer.write_record(writer.create_warc_record(url, "metadata", payload=io.BytesIO(meta),
                                                  warc_content_type=fields))  # fmt: skip


def words(text: str) -> Counter[str]:
    return Counter(re.findall(r"\w+", text.lower()))


def score(outputs: dict[str, str], truth: dict[str, str]) -> tuple[float, float, float]:
    """Micro-averaged word precision, recall and F1 over the pages with a known main text."""
    hit = got = want = 0
    for url, text in truth.items():
        ours, theirs = words(outputs.get(url, "")), words(text)
        hit += sum((ours & theirs).values())
        got += sum(ours.values())
        want += sum(theirs.values())
    precision, recall = hit / max(1, got), hit / max(1, want)
    return precision, recall, 2 * precision * recall / max(1e-9, precision + recall)


def ours_in_process(paths: list[Path], extractor: str) -> tuple[dict[str, str], float]:
    from clozeworks.corpus.text.records import RawDocument, ReadOptions
    from clozeworks.corpus.text.web import read_warc

    out = {}
    started = time.perf_counter()
    for path in paths:
        with gzip.open(path, "rb") as stream:
            for doc in read_warc(stream, path.name, ReadOptions(extractor=extractor)):
                if isinstance(doc, RawDocument):
                    out[json.loads(doc.meta)["url"]] = doc.text
    return out, time.perf_counter() - started


def datatrove_in_process(paths: list[Path]) -> tuple[dict[str, str], float]:
    """datatrove's WarcReader and Trafilatura steps, chained as its executor chains them."""
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.readers import WarcReader

    out = {}
    started = time.perf_counter()
    reader = WarcReader(str(paths[0].parent), glob_pattern="*.warc.gz")
    for doc in Trafilatura().run(reader.run(None, 0, 1), 0, 1):
        out[doc.metadata["url"]] = doc.text
    return out, time.perf_counter() - started


def clean(paths: list[Path], work: Path, workers: int) -> float:
    target = work / f"clean-{workers}"
    started = time.perf_counter()
    subprocess.run(
        [str(Path(sys.executable).parent / "cloze"), "clean", "--input", str(paths[0].parent),
         "--output", str(target), "--no-progress", "--direct_num_workers", str(workers),
         "--direct_running_mode", "multi_processing"],
        check=True,
    )  # fmt: skip
    return time.perf_counter() - started


DATATROVE = """
import sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.extractors import Trafilatura
from datatrove.pipeline.readers import WarcReader
from datatrove.pipeline.writers import JsonlWriter
src, out, logs, workers, tasks = sys.argv[1:]
LocalPipelineExecutor(
    pipeline=[WarcReader(src, glob_pattern="*.warc.gz"), Trafilatura(), JsonlWriter(out)],
    tasks=int(tasks), workers=int(workers), logging_dir=logs,
).run()
"""


def datatrove(paths: list[Path], work: Path, workers: int) -> float:
    target = work / f"datatrove-{workers}"
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", DATATROVE, str(paths[0].parent), str(target),
         str(work / f"datatrove-logs-{workers}"), str(workers), str(len(paths))],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - started


def agreement(a: dict[str, str], b: dict[str, str]) -> float:
    """Of `a`'s lines on URLs both have, the share `b` has (whitespace collapsed)."""
    shared = same = 0
    for url in a.keys() & b.keys():
        theirs = {" ".join(line.split()) for line in b[url].splitlines()}
        for line in a[url].splitlines():
            if line.strip():
                shared += 1
                same += " ".join(line.split()) in theirs
    return same / max(1, shared)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--copies", type=int, default=1)
    args = parser.parse_args()
    paths, size, truth = write_warcs(args.work, args.files, args.copies)
    mb = size / 1e6
    print(f"{len(paths)} WARC files, {mb:.1f} MB uncompressed, "
          f"{sum(p.stat().st_size for p in paths) / 1e6:.1f} MB gzipped; "
          f"{len(truth)} pages with a known main text; load {os.getloadavg()[0]:.2f}")  # fmt: skip
    results = {}
    for extractor in ("resiliparse", "trafilatura"):
        results[f"clozeworks + {extractor}"] = ours_in_process(paths, extractor)
    results["datatrove WarcReader + Trafilatura"] = datatrove_in_process(paths)
    print("\nin one process:")
    for name, (out, seconds) in results.items():
        p, r, f = score(out, truth)
        print(f"  {name:40} {len(out):5} pages {mb / seconds:6.2f} MB/s  "
              f"main text: precision {p:.3f} recall {r:.3f} F1 {f:.3f}")  # fmt: skip
    ours = results["clozeworks + resiliparse"][0]
    theirs = results["datatrove WarcReader + Trafilatura"][0]
    print(f"  agreement: our lines it has {agreement(ours, theirs):.3f}, "
          f"its lines we have {agreement(theirs, ours):.3f}")  # fmt: skip
    p, r, f = score(ours, {url: theirs[url] for url in ours.keys() & theirs.keys()})
    print(f"  words, on the {len(ours.keys() & theirs.keys())} pages both kept: of ours in "
          f"its output {p:.3f}, of its in ours {r:.3f}")  # fmt: skip
    print("\nend to end, all files:")
    for workers in (1, 2):
        t_ours, t_dt = clean(paths, args.work, workers), datatrove(paths, args.work, workers)
        print(f"  {workers} worker(s): cloze clean {mb / t_ours:6.2f} MB/s, datatrove "
              f"{mb / t_dt:6.2f} MB/s, ratio {t_dt / t_ours:.2f}")  # fmt: skip
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
