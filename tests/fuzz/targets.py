"""Fuzz targets: every reader of bytes a user (or a damaged disk) hands the project, each
with the exceptions it documents. Anything else it raises is a crash; `tests.fuzz.run`
drives them with atheris (coverage-guided, libFuzzer), starting from valid seeds.

A target takes the fuzzer's bytes, writes them where the reader looks when the reader
takes a path, and reads to the end (records are consumed, arrays decoded), so damage
found mid-file counts as well as damage in a header.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import zstandard
from tokenizers import Tokenizer, models, pre_tokenizers

from clozeworks.corpus.shards.blocks import ShardWriter, iter_blocks, make_block
from clozeworks.corpus.shards.npy import load_npy_readonly
from clozeworks.corpus.shards.reader import ShardReader, ShardSpec
from clozeworks.corpus.text.readers import ReadOptions, ReadTask
from clozeworks.corpus.vocab.files import load_tokenizer
from clozeworks.pipelines.read_raw import read_records
from clozeworks.schemas.errors import ClozeError
from clozeworks.schemas.manifest import Manifest
from clozeworks.schemas.stats import StoreStats
from clozeworks.trainer.checkpoint import FILES, intact_problem
from clozeworks.trainer.config import TrainConfig, load_config_file
from clozeworks.trainer.finetune.qa import read_questions
from clozeworks.trainer.finetune.readers import read_examples
from clozeworks.trainer.finetune.tasks import load_task

# A reader may hand back at most this many records per input: the fuzzer's inputs are
# small, so more means a loop that does not advance.
MAX_RECORDS = 100_000


@cache
def work() -> Path:
    """Scratch space of the targets that read a path: made on first use, not at import, so
    that collecting the tests leaves no directory behind in the system temp."""
    return Path(tempfile.mkdtemp(prefix="cloze-fuzz-"))


@dataclass(frozen=True)
class Target:
    run: Callable[[bytes], None]
    seeds: Callable[[], list[bytes]]
    # What the reader documents raising for bytes it refuses (beside ClozeError).
    allowed: tuple[type[BaseException], ...] = ()


def _drain(records: Iterator[object]) -> None:
    for n, _ in enumerate(records):
        if n >= MAX_RECORDS:
            raise AssertionError("a reader made more records than its input can hold")


def _records(name: str, fmt: str) -> Callable[[bytes], None]:
    """`pipelines.read_raw.read_records`, as a clean worker calls it on a whole file."""

    def run(data: bytes) -> None:

        task = ReadTask(name, fmt, name=name)
        options = ReadOptions(id_field="id", max_record_bytes=1 << 16)
        _drain(iter(read_records(task, io.BytesIO(data), options)))

    return run


def _jsonl_seed() -> bytes:
    rows = [{"text": "A line of text.\nAnother one.", "id": 1}, {"text": "é ✓", "id": "b"}]
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _parquet_seed() -> bytes:

    sink = io.BytesIO()
    table = pa.table({"text": ["one document", "two"], "id": ["a", "b"]})
    pq.write_table(table, sink, row_group_size=1)
    return sink.getvalue()


def _arrow_seed() -> bytes:
    import pyarrow.ipc as ipc

    sink = pa.BufferOutputStream()
    table = pa.table({"text": ["one document", "two"], "id": ["a", "b"]})
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=1)
    return bytes(sink.getvalue().to_pybytes())


def _wiki_seed() -> bytes:
    page = (
        "<page><title>A</title><ns>0</ns><id>{}</id><revision><text>'''A''' is a "
        "[[letter|letter]].&lt;ref&gt;x&lt;/ref&gt;\n* list\n{{{{t}}}}</text></revision></page>"
    )
    pages = "".join(page.format(i) for i in (1, 2))
    return f"<mediawiki><siteinfo/>{pages}</mediawiki>".encode()


def _modu_seed() -> bytes:
    """A 모두의 말뭉치 file: a written document, a spoken one and one without text."""
    paragraph = [{"id": "p1", "form": "봄 축제가 열렸다."}, {"id": "p2", "form": "시민이 모였다."}]
    utterance = [{"id": "u1", "form": "뭐 했어?", "speaker_id": "1"}]
    documents = [
        {"id": "N.1", "metadata": {"title": "기사", "date": "20190301"}, "paragraph": paragraph},
        {"id": "S.1", "metadata": {"speaker": [{"id": "1"}]}, "utterance": utterance},
        {"id": "N.2", "metadata": {}, "paragraph": []},
    ]
    value = {"id": "N", "metadata": {"title": "말뭉치"}, "document": documents}
    return json.dumps(value, ensure_ascii=False).encode()


def _namu_seed() -> bytes:
    """A NamuWiki dump: an article with most of namumark, a redirect, another namespace."""
    text = (
        "[목차]\n== 개요 ==\n"
        "'''서울'''은 [[대한민국]]의 [[수도(도시)|수도]]이다.[* 각주 [[조선]]]\n"
        '|| 표 || 칸 ||\n * 목록 ~~삭제~~\n{{{#!wiki style="x"\n상자 {{{+1 큰}}}}}}\n'
        "{{{#!html <b>x</b>}}}\n[[파일:a.png]]\n##주석\n----"
    )
    pages = [
        {"namespace": "0", "title": "서울", "text": text, "contributors": ["a"]},
        {"namespace": "0", "title": "한양", "text": "#redirect 서울", "contributors": []},
        {"namespace": "1", "title": "틀:x", "text": "틀", "contributors": []},
    ]
    return json.dumps(pages, ensure_ascii=False).encode()


def _warc_seed() -> bytes:
    """A warcinfo record, an HTML response and a WET conversion record, uncompressed."""
    html = b"<html lang='en'><body><nav>menu</nav><p>A paragraph of the page.</p></body></html>"
    http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" + html
    records = [
        ("warcinfo", "application/warc-fields", b"software: fuzz\r\n", ""),
        ("response", "application/http; msgtype=response", http, "https://a.example/"),
        ("conversion", "text/plain", "Text, é ✓.".encode(), "https://b.example/"),
    ]
    out = []
    for kind, media, block, url in records:
        head = f"WARC/1.0\r\nWARC-Type: {kind}\r\nWARC-Record-ID: <urn:uuid:{kind}>\r\n"
        head += f"WARC-Date: 2026-01-01T00:00:00Z\r\nContent-Type: {media}\r\n"
        head += f"WARC-Target-URI: {url}\r\n" if url else ""
        head += f"Content-Length: {len(block)}\r\n\r\n"
        out.append(head.encode() + block + b"\r\n\r\n")
    return b"".join(out)


COMPRESS = {
    "gz": lambda b: gzip.compress(b, mtime=0),
    "bz2": bz2.compress,
    "xz": lzma.compress,
    "zst": lambda b: zstandard.ZstdCompressor().compress(b),
}


def _shard(data: bytes) -> None:
    """A shard as training reads it (`ShardReader`, every block checked against what the
    manifest promises; the size is what the manifest says, so the fuzzer reaches the tar
    and the arrays), and as `inspect --verify` walks it (`iter_blocks`)."""

    path = work() / "shard-000000.tar"
    path.write_bytes(data)
    spec = ShardSpec("shard-000000.tar", 2, 1, len(data), "", 2, "uint16", 64,
                     frozenset({"tokens", "offsets"}), max_seq_len=32)  # fmt: skip
    with ShardReader(str(path), spec) as reader:
        for k in range(spec.blocks):
            reader.read(k).sequences()
    for _, block in iter_blocks(path):
        block.sequences()


def _shard_seed() -> list[bytes]:

    out = work() / "seed-shards"
    out.mkdir(exist_ok=True)
    ids = np.arange(1, 40, dtype=np.uint16)
    with ShardWriter(out, 0, "uint16") as writer:
        writer.write(make_block([ids[:10], ids[10:25]], "uint16"))
        writer.close()
    return [(out / "shard-000000.tar").read_bytes()]


def _npy(data: bytes) -> None:
    # The loader's contract is np.load's: any dtype may come back; the block decoder (the
    # shard target) checks it against the manifest's.
    array = load_npy_readonly(data)
    assert array.nbytes <= len(data), "an array larger than its bytes"


def _npy_seed() -> list[bytes]:
    seeds = []
    for array in (np.arange(10, dtype=np.uint16), np.zeros(3, dtype=np.int32)):
        sink = io.BytesIO()
        np.save(sink, array)
        seeds.append(sink.getvalue())
    return seeds


def _manifest(data: bytes) -> None:
    Manifest.from_json(data.decode("utf-8", "replace"))


def _manifest_seed() -> list[bytes]:
    path = Path(__file__).parent / "seeds" / "manifest.json"
    return [path.read_bytes()]


def _stats(data: bytes) -> None:
    StoreStats.read(data, "stats.json")


def _stats_seed() -> list[bytes]:
    return [(Path(__file__).parent / "seeds" / "stats.json").read_bytes()]


def _in_dir(name: str, data: bytes) -> Path:
    directory = work() / name.replace(".", "-")
    directory.mkdir(exist_ok=True)
    (directory / name).write_bytes(data)
    return directory


def _tokenizer_json(data: bytes) -> None:
    info = load_tokenizer(_in_dir("tokenizer.json", data))
    info.tokenizer.encode("a probe, of text")


def _vocab_txt(data: bytes) -> None:
    info = load_tokenizer(_in_dir("vocab.txt", data) / "vocab.txt")
    info.tokenizer.encode("a probe, of text")


def _tokenizer_seeds() -> list[bytes]:
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return [tok.to_str().encode()]


def _vocab_seeds() -> list[bytes]:
    return [b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n##b\nprobe\n"]


def _committed(data: bytes) -> None:
    """A checkpoint's COMMITTED marker (and state.json, the same bytes) as resume reads
    them: `intact_problem` says what is wrong, and never raises."""
    step = work() / "run" / "step-0000001"
    step.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        (step / name).write_bytes(data)
    (step / "COMMITTED").write_bytes(data)
    problem = intact_problem(step)
    assert problem is None or isinstance(problem, str)


def _committed_seeds() -> list[bytes]:
    return [b'{"step": 1, "files": {"state.json": {"bytes": 2, "sha256": "00"}}}\n', b"{}"]


def _config(data: bytes) -> None:
    path = work() / "config.toml"
    path.write_bytes(data)
    load_config_file(path, TrainConfig())


def _config_seeds() -> list[bytes]:
    return [b"[model]\nhidden_size = 32\nnum_layers = 2\n[optim]\nwarmup_steps = 1\n"]


def _task_file(task: str, name: str) -> Callable[[bytes], None]:
    def run(data: bytes) -> None:
        spec = load_task(task)
        directory = _in_dir(name, data)
        if spec.format == "squad":
            read_questions(spec, directory, "train")
        else:
            read_examples(spec, directory, "train")

    return run


def _task_seeds(kind: str) -> Callable[[], list[bytes]]:
    seeds = {
        "tsv": [b"sentence\tlabel\na fine film\t1\nnot good\t0\n"],
        "conll": [b"-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n"],
        "squad": [
            json.dumps(
                {"version": "1.1", "data": [{"title": "t", "paragraphs": [{
                    "context": "Paris is in France.",
                    "qas": [{"id": "q", "question": "Where?",
                             "answers": [{"text": "France", "answer_start": 12}]}],
                }]}]}
            ).encode()
        ],
    }  # fmt: skip
    return lambda: seeds[kind]


TARGETS: dict[str, Target] = {
    "jsonl": Target(_records("f.jsonl", "jsonl"), lambda: [_jsonl_seed()]),
    "txt": Target(_records("f.txt", "txt"), lambda: [b"A document.\n\nAnother paragraph.\n"]),
    "parquet": Target(_records("f.parquet", "parquet"), lambda: [_parquet_seed()]),
    "arrow": Target(_records("f.arrow", "arrow"), lambda: [_arrow_seed()]),
    "csv": Target(_records("f.csv", "csv"), lambda: [b'id,text\n1,one\n2,"two, and\nmore"\n']),
    "mediawiki": Target(_records("f-pages-articles.xml", "mediawiki"), lambda: [_wiki_seed()]),
    "warc": Target(_records("f.warc", "warc"), lambda: [_warc_seed()]),
    "warc.gz": Target(
        _records("f.warc.gz", "warc"), lambda: [gzip.compress(_warc_seed(), mtime=0)]
    ),
    "html": Target(_records("f.html", "html"), lambda: [_warc_seed().split(b"\r\n\r\n", 3)[-1]]),
    "modu": Target(_records("NWRW1800000022.json", "modu"), lambda: [_modu_seed()]),
    "namuwiki": Target(_records("namuwiki_20210301.json", "namuwiki"), lambda: [_namu_seed()]),
    "cc100": Target(
        _records("ko.txt", "cc100"), lambda: ["첫 문단.\n둘째 문단.\n\n문서.\n".encode()]
    ),
    **{
        f"jsonl.{suffix}": Target(
            _records(f"f.jsonl.{suffix}", "jsonl"), lambda c=compress: [c(_jsonl_seed())]
        )
        for suffix, compress in COMPRESS.items()
    },
    "shard": Target(_shard, _shard_seed),
    "npy": Target(_npy, _npy_seed, (ValueError, OSError, EOFError)),
    "manifest": Target(_manifest, _manifest_seed),
    "stats": Target(_stats, _stats_seed),
    "tokenizer.json": Target(_tokenizer_json, _tokenizer_seeds),
    "vocab.txt": Target(_vocab_txt, _vocab_seeds),
    "checkpoint": Target(_committed, _committed_seeds),
    "train-config": Target(_config, _config_seeds),
    "glue-tsv": Target(_task_file("glue/sst2", "train.tsv"), _task_seeds("tsv")),
    "conll": Target(_task_file("conll2003", "train.txt"), _task_seeds("conll")),
    "squad": Target(_task_file("squad", "train-v1.1.json"), _task_seeds("squad")),
}


def check(target: Target, data: bytes) -> None:
    """Run one input: the reader's documented refusals pass, anything else propagates."""
    try:
        target.run(data)
    except (ClozeError, *target.allowed):
        pass
