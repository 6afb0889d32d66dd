"""Reading raw inputs: files, directories and globs on any Beam filesystem -> documents,
and the records that could not be read, counted by reason."""

from __future__ import annotations

import contextlib
import glob
import json
import lzma
import os
import shutil
import stat
import tempfile
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import IO, Any, Literal, get_args

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import zstandard
from apache_beam.io.filesystems import FileSystems

from clozeworks.corpus.text.fields import FieldRule
from clozeworks.corpus.text.placing import format_by_name
from clozeworks.corpus.text.readers import (
    DEFAULT_CHUNK_BYTES,
    DEFAULT_MAX_RECORD_BYTES,
    RawDocument,
    ReadOptions,
    ReadTask,
    Rejected,
    count_newlines,
    decompressing,
    is_compressed,
    parquet_layout,
    plan_page_ranges,
    plan_parquet_reads,
    plan_reads,
    plan_stream_ranges,
    read_task,
    strip_compression,
    with_bases,
)
from clozeworks.corpus.text.web import DEFAULT_EXTRACTOR
from clozeworks.pipelines.plumbing.beamfs import BEAM_FS, FileSystemsDoFn
from clozeworks.pipelines.plumbing.counters import counter, utf8_bytes
from clozeworks.pipelines.plumbing.progress import Tally
from clozeworks.schemas.errors import BadInputError

REJECTED = "rejected"
# Tagged output: (path, what is wrong) of each damaged input file, with --on-bad-file skip.
BAD_FILES = "bad_files"
# What a damaged input file does to the run: stop it with one line naming the file
# (`error`), or be counted, named in .stats.json and left (`skip`; the records read from
# it before the damage are kept).
OnBadFile = Literal["error", "skip"]
ON_BAD_FILE: tuple[OnBadFile, ...] = get_args(OnBadFile)
WHOLE_FILE_FORMATS = ("arrow", "csv", "tsv", "mediawiki", "warc", "wet", "html", "modu")
# What `datasets.save_to_disk` writes beside its .arrow files: descriptions, not records.
DATASETS_SIDECARS = ("dataset_info.json", "state.json", "dataset_dict.json")
# Counter prefix: documents read that had a meta field (clean sums them into .stats.json).
META_FOUND = "meta_found."
# Progress count (pipelines.progress): raw input bytes read.
INPUT_BYTES = "input_bytes"


def expand_inputs(patterns: Sequence[str]) -> list[str]:
    """Files named by paths, globs or directories (recursively), sorted, hidden files skipped.

    BadInputError naming the pattern when it matches nothing.
    """
    return [path for path, _ in named_inputs(patterns)]


def named_inputs(patterns: Sequence[str]) -> list[tuple[str, str]]:
    """(path, name) of every input file, sorted by path. The name is the file's path below
    the directory the pattern starts from, after that directory's own name (`raw/a.jsonl`
    for `raw`, `./raw/`, `/data/raw/*.jsonl` or `raw/a.jsonl` alike), so ids made of it do
    not depend on how the input was typed or where it lies. BadInputError when a pattern
    matches nothing, or when two files would get the same name. Files that cannot be read
    are left out (`skipped_inputs` says which)."""
    named: dict[str, str] = {}
    unreadable = {os.path.abspath(p) for p in skipped_inputs(patterns).get("unreadable", [])}
    for pattern in patterns:
        if any(ch in pattern for ch in "*?["):
            matched = _match(pattern)
            root = pattern[: min(pattern.find(c) for c in "*?[" if c in pattern)]
            root = root.rsplit("/", 1)[0] if "/" in root else "."
        else:
            # A directory (local or an object-store prefix) is read recursively.
            matched = _match(BEAM_FS.join(pattern.rstrip("/"), "**"))
            root = pattern.rstrip("/")
            if not matched:
                matched = _match(pattern)
                root = pattern.rsplit("/", 1)[0] if "/" in pattern.rstrip("/") else "."
        matched = [m for m in matched if not _hidden(m) and not os.path.isdir(m)]
        matched = _without_datasets_sidecars(matched)
        if not matched:
            raise BadInputError(f"{pattern}: no such file or directory (or nothing in it)")
        for path in matched:
            _check_utf8(path)
            _check_regular(path)
            if "://" in path or os.path.abspath(path) not in unreadable:
                named.setdefault(path, _name_below(path, root))
    seen: dict[str, str] = {}
    for path, name in sorted(named.items()):
        if name in seen:
            raise BadInputError(
                f"{seen[name]} and {path} would both be named {name} in document ids; "
                "give their directories different names, or ids with --id-field"
            )
        seen[name] = path
    return sorted(named.items())


def _without_datasets_sidecars(paths: list[str]) -> list[str]:
    """`paths` less the description files of `datasets.save_to_disk` directories (those
    with .arrow files): reading them as jsonl would find no text in them."""
    arrow_dirs = {p.rsplit("/", 1)[0] for p in paths if strip_compression(p).endswith(".arrow")}
    return [
        p
        for p in paths
        if not (p.rsplit("/", 1)[-1] in DATASETS_SIDECARS and p.rsplit("/", 1)[0] in arrow_dirs)
    ]


# Why an input file is left out: it cannot be read, and a corpus of many files is better
# cleaned without it than not at all. Counted in .stats.json under `skipped_files`.
SKIP_REASONS = ("dangling_symlink", "unreadable")


def skipped_inputs(patterns: Sequence[str]) -> dict[str, list[str]]:
    """Local input files that cannot be read, by reason (SKIP_REASONS), each sorted: a
    symlink to nothing (Beam's listing drops it without a word) or a file this user may not
    read. Hidden files are no inputs, so no skips. Object stores list only readable objects."""
    found: dict[str, set[str]] = {}
    for pattern in patterns:
        if "://" in pattern and not pattern.startswith("file://"):
            continue
        local = pattern.removeprefix("file://")
        if any(ch in local for ch in "*?["):
            candidates = glob.glob(local, recursive=True)
        elif os.path.isdir(local):
            candidates = glob.glob(os.path.join(glob.escape(local), "**"), recursive=True)
        else:
            candidates = [local]
        for path in candidates:
            if _hidden(path) or not os.path.lexists(path):
                continue
            if os.path.islink(path) and not os.path.exists(path):
                found.setdefault("dangling_symlink", set()).add(path)
            elif os.path.isfile(path) and not os.access(path, os.R_OK):
                found.setdefault("unreadable", set()).add(path)
    return {reason: sorted(paths) for reason, paths in sorted(found.items())}


_SPECIAL = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def _check_regular(path: str) -> None:
    """A FIFO, socket or device among the inputs is refused, never opened: reading one
    blocks until something writes to it (forever, for a FIFO nobody feeds)."""
    if "://" in path and not path.startswith("file://"):
        return  # object stores hold objects only
    try:
        mode = os.stat(path.removeprefix("file://")).st_mode
    except OSError:
        return  # gone or unreadable: opening it names the problem
    kind = _SPECIAL.get(stat.S_IFMT(mode))
    if kind is not None:
        raise BadInputError(f"{path}: {kind}, not a regular file; inputs must be files")


def _check_utf8(path: str) -> None:
    """Documents name their file in ids and `source` (UTF-8 strings everywhere downstream):
    a name with bytes that are not UTF-8 cannot be carried there."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", errors="backslashreplace")
        raise BadInputError(
            f"{shown}: the file name is not UTF-8, so it cannot name documents; rename it"
        ) from None


def _name_below(path: str, root: str) -> str:
    if "://" in root:
        base = root.rstrip("/")
        return base.rsplit("/", 1)[-1] + "/" + path[len(base) :].lstrip("/")
    top = os.path.abspath(root)
    relative = os.path.relpath(os.path.abspath(path), top)
    return f"{os.path.basename(top) or top}/{relative}".replace(os.sep, "/")


def _match(pattern: str) -> list[str]:
    try:
        return [m.path for m in FileSystems.match([pattern])[0].metadata_list]
    except Exception as err:
        raise BadInputError(f"{pattern}: cannot list input ({err})") from None


def _hidden(path: str) -> bool:
    return path.replace("\\", "/").rsplit("/", 1)[-1].startswith((".", "_"))


def _file_size(path: str) -> int:
    try:
        return int(FileSystems.match([path])[0].metadata_list[0].size_in_bytes)
    except Exception as err:
        raise BadInputError(f"{path}: cannot read ({err})") from None


def _open(path: str) -> Any:
    try:
        return BEAM_FS.open(path)
    except Exception as err:
        raise BadInputError(f"{path}: cannot open ({err})") from None


# What a broken file raises mid-read: truncated or corrupt compression, I/O failures.
READ_ERRORS = (
    OSError,
    EOFError,
    zlib.error,
    lzma.LZMAError,
    zstandard.ZstdError,
    pa.ArrowException,  # a damaged Parquet page, found mid-file
)


class _PlanReads(FileSystemsDoFn):
    """A file -> the ReadTasks that read it (ranges of a large file are numbered later).

    A file is a path, (path, name) or (path, name, format); without a format its name's,
    else `fmt`'s, else text."""

    def __init__(self, fmt: str | None, doc_sep: str, chunk_bytes: int, skip: bool) -> None:
        super().__init__()
        self.fmt = fmt
        self.doc_sep = doc_sep
        self.chunk_bytes = chunk_bytes
        self.skip = skip

    def process(self, item: str | Sequence[str]) -> Iterator[Any]:
        path, name, fmt = (item, "", None) if isinstance(item, str) else (*item, None)[:3]
        fmt = fmt or self.fmt or format_by_name(path) or "txt"
        try:
            tasks = list(self._plan(path, fmt))
        except (BadInputError, *READ_ERRORS) as err:
            yield from _bad_file(path, err, self.skip)
            return
        for task in tasks:
            yield replace(task, name=name)

    def _plan(self, path: str, fmt: str) -> Iterable[ReadTask]:
        if fmt == "mediawiki" and path.lower().endswith(".bz2"):
            # A multistream dump (every 100 pages a bz2 stream of its own) is read by
            # ranges: each reads the streams that start in it (corpus/text/wiki.py).
            return plan_stream_ranges(path, _file_size(path), self.chunk_bytes)
        if fmt == "namuwiki":
            return plan_page_ranges(path, _file_size(path), self.chunk_bytes)
        if fmt in WHOLE_FILE_FORMATS:
            # Arrow streams and CSV (quoted fields may span lines) are read from the start.
            return [ReadTask(path, fmt)]
        if fmt != "parquet":
            return plan_reads(path, fmt, _file_size(path), self.doc_sep, self.chunk_bytes)
        if is_compressed(path):
            return [ReadTask(path, fmt)]
        with _open(path) as f:
            rows, sizes = parquet_layout(f, path)
        return plan_parquet_reads(path, rows, sizes, self.chunk_bytes)


def _bad_file(path: str, err: BaseException, skip: bool) -> Iterator[Any]:
    """A damaged file's one line: raised, or (skipping) counted and passed on by name."""
    message = str(err) if isinstance(err, BadInputError) else f"{path}: cannot read ({err})"
    if not skip:
        raise BadInputError(message) from None
    yield beam.pvalue.TaggedOutput(BAD_FILES, (path, message))


def _numbered_or_not(task: ReadTask, partitions: int) -> int:
    return 0 if task.base is not None else 1


class _CountLines(FileSystemsDoFn):
    """A range of a split file -> (path, (range, newlines in it))."""

    def __init__(self, skip: bool) -> None:
        super().__init__()
        self.skip = skip

    def process(self, task: ReadTask) -> Iterator[Any]:
        try:
            with _open(task.path) as f:
                count = count_newlines(f, task.start, task.end)
        except (BadInputError, *READ_ERRORS) as err:
            yield from _bad_file(task.path, err, self.skip)
            return
        yield task.path, (task, count)


def _number_ranges(item: tuple[str, Iterable[tuple[ReadTask, int]]]) -> list[ReadTask]:
    tasks, counts = zip(*item[1], strict=True)
    return with_bases(tasks, counts)


class _ReadRecords(FileSystemsDoFn):
    def __init__(self, options: ReadOptions, skip: bool) -> None:
        super().__init__()
        self.options = options
        self.skip = skip
        self.docs_in = counter("documents_in")
        self.bytes_in = counter("bytes_in")

    def setup(self) -> None:
        super().setup()
        self.tally = Tally()

    def finish_bundle(self) -> None:
        self.tally.save()

    def process(self, task: ReadTask) -> Iterator[Any]:
        try:
            yield from self._read(task)
        except BadInputError as err:
            yield from _bad_file(task.path, err, self.skip)

    def _read(self, task: ReadTask) -> Iterator[Any]:
        with _open(task.path) as raw:
            done = 0
            for i, record in enumerate(read_records(task, raw, self.options)):
                self.docs_in.inc()
                if isinstance(record, Rejected):
                    counter(f"dropped.{record.reason}").inc()
                    yield beam.pvalue.TaggedOutput(REJECTED, record)
                else:
                    self.bytes_in.inc(utf8_bytes(record.text))
                    if record.meta != "{}":
                        for name in json.loads(record.meta):
                            counter(META_FOUND + name).inc()
                    yield record
                if i % 256 == 255 and self.tally.path and task.fmt != "parquet":
                    with contextlib.suppress(OSError, ValueError):
                        position = raw.tell() - task.start
                        self.tally.add(INPUT_BYTES, position - done)
                        done = position
            if self.tally.path:
                with contextlib.suppress(OSError, ValueError):
                    self.tally.add(INPUT_BYTES, _task_bytes(task, raw) - done)


def _task_bytes(task: ReadTask, raw: IO[bytes]) -> int:
    """How many bytes of its file `task` stands for (Parquet: its row groups' share)."""
    size = raw.seek(0, os.SEEK_END)
    if task.fmt != "parquet":
        return (size if task.end is None else task.end) - task.start
    raw.seek(0)
    groups = pq.ParquetFile(raw).metadata.num_row_groups or 1
    end = groups if task.end is None else task.end
    return size * (end - task.start) // groups


def read_records(
    task: ReadTask, raw: IO[bytes], options: ReadOptions
) -> Iterator[RawDocument | Rejected]:
    """The records of `task` from the file's raw bytes; BadInputError naming the file for
    damage the decompressor or the parser finds (a truncated or corrupt file)."""
    try:
        with _stream(task, raw) as stream:
            yield from read_task(task, stream, options)
    except READ_ERRORS as err:
        raise BadInputError(f"{task.path}: cannot read ({err})") from None


def _stream(task: ReadTask, raw: IO[bytes]) -> Any:
    if task.fmt == "mediawiki" and task.path.lower().endswith(".bz2"):
        return contextlib.nullcontext(raw)  # its streams are found and opened one by one
    stream = decompressing(raw, task.path)
    if task.fmt != "parquet" or not is_compressed(task.path):
        return stream if stream is not raw else contextlib.nullcontext(raw)
    # Parquet needs random access; spool the decompressed file to local disk, not memory.
    spool = tempfile.TemporaryFile()  # noqa: SIM115 - closed by the caller's `with`
    with stream:
        shutil.copyfileobj(stream, spool, 1 << 20)
    spool.seek(0)
    return spool


class ReadRawDocuments(beam.PTransform):
    """Raw input files -> {"documents": RawDocument, "rejected": Rejected, "bad_files":
    (path, what is wrong) of each damaged file when `on_bad_file` is `skip`}.

    Files are planned into read tasks (large uncompressed files into byte ranges, Parquet
    into runs of row groups); ranges of one file learn how many lines precede them from a
    newline count, so ids are `{name}#{line}` whichever worker reads which range. `files`
    are paths, (path, name) pairs from `named_inputs` (a bare path is its own name), or
    (path, name, format) triples; a file without a format is read as `fmt`, else as its name
    says (corpus/text/placing.py), else as text.
    """

    def __init__(
        self,
        files: Sequence[str | tuple[str, str] | tuple[str, str, str]],
        fmt: str | None = None,
        text_field: str = "text",
        id_field: str | None = None,
        doc_sep: str = "file",
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        rules: Sequence[FieldRule] = (),
        meta_fields: Sequence[str] = (),
        extractor: str = DEFAULT_EXTRACTOR,
        on_bad_file: OnBadFile = "error",
    ) -> None:
        super().__init__()
        self.files = list(files)
        self.fmt = fmt
        self.doc_sep = doc_sep
        self.chunk_bytes = chunk_bytes
        self.skip = on_bad_file == "skip"
        self.options = ReadOptions(
            text_field,
            id_field,
            doc_sep,
            max_record_bytes,
            tuple(rules),
            tuple(meta_fields),
            extractor,
        )

    def expand(self, pbegin: Any) -> dict[str, Any]:
        planned = (
            pbegin
            | "ListFiles" >> beam.Create(self.files)
            | "PlanReads"
            >> beam.ParDo(
                _PlanReads(self.fmt, self.doc_sep, self.chunk_bytes, self.skip)
            ).with_outputs(BAD_FILES, main="tasks")
        )
        tasks = (
            planned.tasks
            # One task per element; the reshuffle spreads them over workers.
            | "SpreadTasks" >> beam.Reshuffle()
            | "SplitNumbered" >> beam.Partition(_numbered_or_not, 2)
        )
        # Ranges of split files, each told how many lines precede it.
        counted = tasks[1] | "CountLines" >> beam.ParDo(_CountLines(self.skip)).with_outputs(
            BAD_FILES, main="counts"
        )
        numbered = (
            counted.counts
            | "GroupByFile" >> beam.GroupByKey()
            | "NumberRanges" >> beam.FlatMap(_number_ranges)
            | "SpreadRanges" >> beam.Reshuffle()
        )
        read = (
            (tasks[0], numbered)
            | "AllTasks" >> beam.Flatten()
            | "ReadRecords"
            >> beam.ParDo(_ReadRecords(self.options, self.skip)).with_outputs(
                REJECTED, BAD_FILES, main="documents"
            )
        )
        bad = (planned[BAD_FILES], counted[BAD_FILES], read[BAD_FILES]) | "AllBadFiles" >> (
            beam.Flatten()
        )
        return {"documents": read.documents, REJECTED: read[REJECTED], BAD_FILES: bad}
