"""`cloze clean`: raw files -> normalized, filtered documents (a document store)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from clozeworks.corpus.outputs import check_apart
from clozeworks.corpus.text.fields import FieldRule, parse_field_rules, parse_names
from clozeworks.corpus.text.filters import (
    FILTERS,
    DocumentFilter,
    apply_filters,
    build_filters,
    expand_names,
)
from clozeworks.corpus.text.filters.languages import (
    UNDETERMINED,
    declared_language,
    is_language_code,
    settings_report,
)
from clozeworks.corpus.text.normalize import NormalForm, check_mojibake_support, normalize_text
from clozeworks.corpus.text.placing import FormatRule, parse_format_rules
from clozeworks.corpus.text.readers import (
    DEFAULT_CHUNK_BYTES,
    DEFAULT_MAX_RECORD_BYTES,
    FORMAT_NEEDS,
    DocSep,
    RawDocument,
    ReadOptions,
    Rejected,
    is_compressed,
)
from clozeworks.corpus.text.scripts import language_of_script, non_latin_script
from clozeworks.corpus.text.web import DEFAULT_EXTRACTOR, ExtractorName
from clozeworks.pipelines.input_files import (
    DAMAGED,
    WriteBadFiles,
    nothing_readable,
    place_inputs,
    read_bad_files,
    skipped_report,
)
from clozeworks.pipelines.plumbing.beamfs import BEAM_FS
from clozeworks.pipelines.plumbing.counters import counter, utf8_bytes
from clozeworks.pipelines.plumbing.progress import Bar
from clozeworks.pipelines.plumbing.shuffle import Shuffle
from clozeworks.pipelines.plumbing.stage import StageRun, remove_shuffle
from clozeworks.pipelines.read_raw import (
    BAD_FILES,
    INPUT_BYTES,
    META_FOUND,
    REJECTED,
    OnBadFile,
    ReadRawDocuments,
    named_inputs,
)
from clozeworks.pipelines.unique_ids import UniqueIds
from clozeworks.pipelines.write_store import WriteParquetParts, parts_for, to_row
from clozeworks.schemas.documents import DOCS_GLOB, DOCS_PREFIX
from clozeworks.schemas.errors import BadInputError, SettingError, UsageError
from clozeworks.schemas.settings import check_at_least, check_choices, setting
from clozeworks.schemas.sidecars import STATS_FILE
from clozeworks.schemas.stats import StoreStats

DROPPED = "dropped"
LANGUAGE_FOUND = "language."
LANGUAGE_BYTES = "language_bytes."
# Documents the language-dependent filters judged by English's rules for want of a
# language, and of those the ones mostly in another script, by script.
ENGLISH_RULES = "english_rules.documents"
ENGLISH_RULES_SCRIPT = "english_rules.script."
# Below this share of such documents the counts are in .stats.json but nothing is said:
# a few quoted lines of another script do not make a corpus one.
WARN_SHARE = 0.05
REJECTS_GLOB = "rejects-*.jsonl.gz"
REJECTS_MARKER = "rejects.json"


def _names(text: str) -> tuple[str, ...]:
    """A comma-separated list of filter names, shorthands expanded (`gopher`); ValueError
    naming an unknown one."""
    return tuple(expand_names([f for f in text.split(",") if f]))


@dataclass(frozen=True)
class CleanSettings:
    # A corpus mixes dumps, crawls and text whose names may not say what they are.
    formats: tuple[FormatRule, ...] = setting(
        (),
        "record format of every file (jsonl, parquet, txt, arrow, csv, tsv, mediawiki, warc, "
        "wet, html, namuwiki, modu: 모두의 말뭉치 JSON, cc100: a blank line after each "
        "document), "
        "or per file: rules 'PATTERN:FORMAT' separated by ';', PATTERN matched "
        "as --fields' are (default: by the file's name, else its first bytes)",
        parse=parse_format_rules,
        flag="format",
        metavar="FORMAT|RULES",
    )
    on_bad_file: OnBadFile = setting(
        "error",
        "a damaged input file (truncated, corrupt compression, not its format): stop with "
        "one line naming it (error), or count and name it in .stats.json and go on (skip)",
    )
    text_field: str = setting("text", "JSON field / Parquet column of the text")
    id_field: str | None = setting(None, "field holding a document id (default: path#line)")
    # A corpus mixes sources that name their fields differently; one --text-field would
    # drop every record of the others as missing_text.
    fields: tuple[FieldRule, ...] = setting(
        (),
        "per-file text and id fields: rules 'PATTERN:text=FIELD,id=FIELD' separated by ';', "
        "PATTERN matched against a file's path from its input's name (raw/web/*.jsonl); the "
        "first match wins, other files take --text-field and --id-field",
        parse=parse_field_rules,
        metavar="RULES",
    )
    # Provenance and labels follow a document through dedup into the shards.
    meta_fields: tuple[str, ...] = setting(
        (),
        "comma-separated JSON fields / Parquet columns kept in each document's meta",
        parse=parse_names,
        metavar="FIELDS",
    )
    doc_sep: DocSep = setting("file", ".txt: a file or a blank-line block per document")
    normal_form: NormalForm = setting("NFC", "Unicode normal form", flag="normalize")
    filters: tuple[str, ...] = setting(
        ("length",),
        f"comma-separated, from: {', '.join(sorted([*FILTERS, 'gopher']))}",
        parse=_names,
    )
    fix_mojibake: bool = setting(
        False, "repair wrongly decoded text with ftfy (needs the [ftfy] extra)"
    )
    max_record_bytes: int = setting(
        DEFAULT_MAX_RECORD_BYTES,
        "longer raw records are counted as too_long and skipped unread",
    )
    # The filters' rules follow the document's language (corpus/text/filters/languages.py).
    language: str = setting(
        "",
        "language of the corpus (ISO 639-1, e.g. ko) whose filter settings apply; the "
        "language filter's answer wins for each document it identifies (default: English's)",
        metavar="CODE",
    )
    extractor: ExtractorName = setting(
        DEFAULT_EXTRACTOR, "main text of HTML (warc, html): resiliparse or trafilatura"
    )
    # Each filter's thresholds, by filter: flags of their own, from the filter registry.
    filter_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    chunk_bytes: int = DEFAULT_CHUNK_BYTES

    def validate(self) -> list[DocumentFilter]:
        """The filters, built; SettingError for a value no run can use."""
        check_choices(self)
        check_at_least("max_record_bytes", self.max_record_bytes, 1)
        if self.language and not is_language_code(self.language):
            raise SettingError(
                "language", f"{self.language!r} is not an ISO 639-1 code such as ko, en or zh-CN"
            )
        if self.fix_mojibake:
            check_mojibake_support()
        try:
            filters = build_filters(self.filters, self.filter_options)
        except (ValueError, TypeError) as err:
            raise UsageError(str(err)) from None
        for f in filters:
            check = getattr(f, "check", None)
            if check is not None:
                check()
        return filters


@dataclass(frozen=True, kw_only=True)
class CleanConfig(CleanSettings):
    """The clean settings, and where: the raw inputs, the output store, and where the
    rejected records go (if anywhere)."""

    inputs: Sequence[str]
    output: str
    rejects: str | None = None


class _CleanDocument(beam.DoFn):
    def __init__(
        self, normal_form: str, filters: Sequence[DocumentFilter], fix: bool, language: str
    ) -> None:
        self.normal_form = normal_form
        self.filters = list(filters)
        self.fix = fix
        self.language = language or None
        # Only these filters' rules depend on the language (filters/languages.py).
        self.judges_language = any(hasattr(f, "filter_in") for f in self.filters)
        self.kept = counter("documents_out")
        self.bytes_out = counter("bytes_out")

    def process(self, doc: RawDocument) -> Iterator[Any]:
        text = normalize_text(doc.text, self.normal_form, self.fix)
        # A language the document declares (WARC/WET, Content-Language, lang) is more
        # specific than the corpus's; the language filter's answer wins over both.
        language = declared_language(doc.meta) or self.language
        result = apply_filters(text, self.filters, language) if text else None
        if result is not None:
            code = result.language or UNDETERMINED
            counter(f"{LANGUAGE_FOUND}{code}").inc()
            counter(f"{LANGUAGE_BYTES}{code}").inc(utf8_bytes(text))
            if self.judges_language and result.language is None:
                counter(ENGLISH_RULES).inc()
                script = non_latin_script(text)
                if script is not None:
                    counter(f"{ENGLISH_RULES_SCRIPT}{script}").inc()
        if result is None or not result.keep:
            reason = "empty_after_normalize" if result is None else str(result.reason)
            counter(f"dropped.{reason}").inc()
            yield beam.pvalue.TaggedOutput(DROPPED, (reason, doc))
            return
        final = result.text if result.text is not None else text
        if not final:
            counter("dropped.empty_after_filters").inc()
            yield beam.pvalue.TaggedOutput(DROPPED, ("empty_after_filters", doc))
            return
        self.kept.inc()
        self.bytes_out.inc(utf8_bytes(final))
        yield to_row(RawDocument(doc.id, final, doc.source, doc.meta))


class CleanDocuments(beam.PTransform):
    """RawDocument -> document rows (main) and (reason, RawDocument) tagged `dropped`."""

    def __init__(
        self,
        normal_form: str,
        filters: Sequence[DocumentFilter],
        fix_mojibake: bool = False,
        language: str = CleanSettings.language,
    ) -> None:
        super().__init__()
        self.normal_form = normal_form
        self.filters = filters
        self.fix_mojibake = fix_mojibake
        self.language = language

    def expand(self, docs: Any) -> Any:
        return docs | "NormalizeAndFilter" >> beam.ParDo(
            _CleanDocument(self.normal_form, self.filters, self.fix_mojibake, self.language)
        ).with_outputs(DROPPED, main="kept")


def rejected_line(record: Rejected) -> str:
    """A reader rejection as one JSON line of the rejects store."""
    return json.dumps(
        {
            "reason": record.reason,
            "source": record.source,
            "position": record.position,
            "detail": record.detail,
            "sample": record.sample,
        },
        ensure_ascii=False,
    )


def dropped_line(item: tuple[str, RawDocument]) -> str:
    """A document a filter dropped, with its reason and original text, as one JSON line."""
    reason, doc = item
    return json.dumps(
        {"reason": reason, "id": doc.id, "source": doc.source, "text": doc.text},
        ensure_ascii=False,
    )


class WriteRejects(beam.PTransform):
    """JSON lines -> gzipped `rejects-*.jsonl.gz` parts under a staging directory."""

    def __init__(self, staging: str) -> None:
        super().__init__()
        self.staging = staging

    def expand(self, lines: Any) -> Any:
        return lines | "WriteJsonLines" >> beam.io.WriteToText(
            BEAM_FS.join(self.staging, "rejects"),
            file_name_suffix=".jsonl.gz",
            shard_name_template="-SSSSS-of-NNNNN",
        )


def _check(config: CleanConfig) -> list[DocumentFilter]:
    filters = config.validate()
    if config.rejects and config.rejects.rstrip("/") == config.output.rstrip("/"):
        raise SettingError("rejects", "must differ from {output}")
    return filters


class Clean(beam.PTransform):
    """The clean stage: raw files -> normalized, filtered document rows written as part files
    in `staging` (through one grouping by id, so which documents share a file does not
    depend on the workers), and with `rejects_staging` every record it did not keep, as
    JSON lines with the reason. With ids from the input, one document per id."""

    def __init__(
        self,
        config: CleanConfig,
        files: Sequence[tuple[str, str, str]],
        filters: Sequence[DocumentFilter],
        staging: str,
        rejects_staging: str | None,
        shuffle: Shuffle | None = None,
        parts: int = 1,
    ) -> None:
        super().__init__()
        self.config = config
        self.files = files
        self.filters = filters
        self.staging = staging
        self.rejects_staging = rejects_staging
        self.shuffle = shuffle or Shuffle()
        self.parts = parts

    def expand(self, pbegin: Any) -> None:
        config, shuffle = self.config, self.shuffle
        # RawDocument; unusable records go to `rejected`, counted by reason.
        raw = pbegin | "ReadRaw" >> ReadRawDocuments(
            self.files,
            None,
            config.text_field,
            config.id_field,
            config.doc_sep,
            config.max_record_bytes,
            config.chunk_bytes,
            rules=config.fields,
            meta_fields=config.meta_fields,
            extractor=config.extractor,
            on_bad_file=config.on_bad_file,
        )
        if config.on_bad_file == "skip":
            _ = raw[BAD_FILES] | "WriteBadFiles" >> WriteBadFiles(self.staging)
        # Document rows that passed every filter, and (reason, document) that did not.
        cleaned = raw["documents"] | "Clean" >> CleanDocuments(
            config.normal_form, self.filters, config.fix_mojibake, config.language
        )
        kept, dropped = cleaned.kept, [cleaned.dropped]
        if config.id_field:
            unique = kept | "UniqueIds" >> UniqueIds(shuffle)
            kept = unique.kept
            dropped.append(unique.dropped)
        _ = kept | "Write" >> WriteParquetParts(self.staging, self.parts, shuffle)
        if self.rejects_staging:
            unread = raw[REJECTED] | "RejectedAsJson" >> beam.Map(rejected_line)
            lines = [
                drops | f"DroppedAsJson{i}" >> beam.Map(dropped_line)
                for i, drops in enumerate(dropped)
            ]
            _ = (
                (unread, *lines)
                | "AllRejects" >> beam.Flatten()
                | "WriteRejects" >> WriteRejects(self.rejects_staging)
            )


def run_clean(
    config: CleanConfig, beam_argv: Sequence[str] = (), progress: bool = False
) -> dict[str, Any]:
    """Run the clean pipeline; returns the stats written to `output/.stats.json`. With
    `progress`, bars on stderr while it runs on this machine.

    Raises BadInputError for inputs that match nothing or cannot be read, UsageError for
    settings that cannot work; nothing is left in `output` by a failed run.
    """
    filters = _check(config)
    check_apart({"output": config.output, "rejects": config.rejects}, {"input": config.inputs})
    with StageRun(beam_argv, progress, "clean") as run:
        # a model the workers open must be where they can read it, as the outputs
        opened = {flag: path for f in filters for flag, path in getattr(f, "worker_files", list)()}
        outputs = {"output": config.output, "rejects": config.rejects}
        run.require_reach(config.inputs, {**outputs, **opened})
        placed = place_inputs(
            named_inputs(config.inputs), config.formats, config.on_bad_file == "skip"
        )
        files = placed.files
        if not files:
            raise BadInputError(nothing_readable(placed))
        # Before a worker meets a dump or a WARC file without its parser.
        options = ReadOptions(extractor=config.extractor)
        for fmt in sorted(placed.formats.keys() & FORMAT_NEEDS.keys()):
            FORMAT_NEEDS[fmt](options)
        skipped = skipped_report(config.inputs, placed.left_out)
        staging = run.stage(config.output)
        rejects_staging = run.stage(config.rejects) if config.rejects else None
        sizes = _input_sizes([path for path, _, _ in files])
        text_bytes = sum(size * (4 if is_compressed(path) else 1) for path, size in sizes)
        shuffle = run.shuffle(BEAM_FS.join(staging, "_shuffle"), text_bytes)
        bars = [
            Bar(INPUT_BYTES, "read", sum(size for _, size in sizes), "bytes"),
            Bar(f"written.{DOCS_PREFIX}", "written"),
        ]
        with run.progress(bars), run.pipeline() as p:
            clean = Clean(
                config, files, filters, staging, rejects_staging, shuffle, parts_for(text_bytes)
            )
            _ = p | "Clean" >> clean
        remove_shuffle(shuffle)
        if config.on_bad_file == "skip":
            damaged = read_bad_files(staging)
            if damaged:
                found = sorted([*placed.left_out.get(DAMAGED, []), *damaged])
                skipped = skipped_report(config.inputs, {**placed.left_out, DAMAGED: found})
        counts = _zero_defaults(run.counters)
        found = {
            k.removeprefix(META_FOUND): counts.pop(k)
            for k in list(counts)
            if k.startswith(META_FOUND)
        }
        languages = {
            k.removeprefix(LANGUAGE_FOUND): counts.pop(k)
            for k in list(counts)
            if k.startswith(LANGUAGE_FOUND)
        }
        language_bytes = {
            k.removeprefix(LANGUAGE_BYTES): counts.pop(k)
            for k in list(counts)
            if k.startswith(LANGUAGE_BYTES)
        }
        scripts = {
            k.removeprefix(ENGLISH_RULES_SCRIPT): counts.pop(k)
            for k in list(counts)
            if k.startswith(ENGLISH_RULES_SCRIPT)
        }
        english_rules = _english_rules(counts.pop(ENGLISH_RULES, 0), scripts)
        missing = counts.get("dropped.missing_text", 0)
        if missing and missing == counts["documents_in"]:
            # Not a corpus with bad records: a field name that matches nothing.
            raise SettingError(
                "text_field",
                f"matches nothing: none of the {missing} records has a text field "
                f"{config.text_field!r} (set it to the field or column that holds the text)",
            )
        written = {
            "stage": "clean",
            "inputs": list(config.inputs),
            "files": len(files),
            # How many files were read as each format (by rule, name or first bytes).
            "formats": placed.formats,
            # Input files left out, by reason: how many, and the first few by name, with
            # what is wrong with each where there is more to say than the reason.
            "skipped_files": skipped,
            "filters": {f.name: dataclasses.asdict(f) for f in filters},  # type: ignore[call-overload]
            "normal_form": config.normal_form,
            "fix_mojibake": config.fix_mojibake,
            "fields": [rule.to_text() for rule in config.fields],
            # Documents read that had each meta field (0: a name that matches nothing).
            "meta_fields": {name: found.get(name, 0) for name in config.meta_fields},
            # The language the corpus was said to be in ("" none), and per language
            # identified (or declared) the documents, their bytes and the settings they got.
            "language": config.language,
            "languages": settings_report(languages, language_bytes),
            # Documents judged by English's rules for want of a language, those mostly in
            # another script, and what `clean` said of it (None: nothing to say).
            "english_rules": english_rules,
            **counts,
        }
        # The record as a reader will take it: a stage whose counts do not add up fails here.
        stats = StoreStats.from_json(written, f"{config.output}/{STATS_FILE}").to_json()
        if rejects_staging and config.rejects:
            dropped = {k: v for k, v in counts.items() if k.startswith("dropped.")}
            run.commit(rejects_staging, config.rejects, REJECTS_GLOB, REJECTS_MARKER, dropped)
        run.commit(staging, config.output, DOCS_GLOB, STATS_FILE, stats)
    return stats


def _english_rules(documents: int, scripts: dict[str, int]) -> dict[str, Any]:
    """`.stats.json`'s `english_rules`, with the warning `clean` prints when at least
    WARN_SHARE of the documents judged by English's rules are mostly in another script."""
    other = sum(scripts.values())
    warning = None
    if documents and other >= WARN_SHARE * documents:
        script, most = max(scripts.items(), key=lambda kv: kv[1])
        code = language_of_script(script)
        say = f"--language {code}" if code and most >= 0.9 * other else "--language CODE"
        warning = (
            f"{other} of {documents} documents ({other / documents:.0%}) were filtered by "
            f"English's rules (no --language, no language found) though their letters are "
            f"mostly not Latin ({', '.join(f'{n} {s}' for s, n in sorted(scripts.items()))}); "
            f"English's stop-word and word rules drop most such pages. Pass {say}, or add "
            "the language filter (--filters language,...) for a corpus of several languages"
        )
    return {"documents": documents, "not_latin": other, "scripts": scripts, "warning": warning}


def language_warning(stats: dict[str, Any]) -> str | None:
    """What a clean stage's `.stats.json` says about English's rules on another script."""
    rules = stats.get("english_rules")
    return rules.get("warning") if isinstance(rules, dict) else None


def _input_sizes(files: Sequence[str]) -> list[tuple[str, int]]:
    """(path, bytes) of each input: the total for progress, and (compressed files counting
    four times their size) about how much text there is, to size the groupings."""
    return [
        (meta.path, meta.size_in_bytes)
        for result in FileSystems.match(list(files))
        for meta in result.metadata_list
    ]


def _zero_defaults(counters: dict[str, int]) -> dict[str, int]:
    base = {"documents_in": 0, "documents_out": 0, "bytes_in": 0, "bytes_out": 0}
    base.update(counters)
    return base
