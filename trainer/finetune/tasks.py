"""Fine-tuning tasks: what a task's files look like, its labels and its metrics.

A task is a `TaskSpec`, built in by name (`glue/mrpc`, ...: GLUE's TSV files as its
download script writes them, each task's columns, label set and metrics as the GLUE paper
and transformers' `glue.py` processors define them) or read from a TOML file:

    name = "reviews"
    shape = "single"            # single | pair | regression (of one text, or of a pair) |
                                # tokens | qa | choice
    format = "jsonl"            # jsonl | json | csv | tsv | conll (tokens: a word per line) |
                                # squad (qa) | race (RACE's files)
    text_a = "review"           # a column name (or a 0-based index for files without header)
    label = "stars"
    labels = ["1", "2", "3", "4", "5"]
    metrics = ["accuracy", "f1_macro"]
    [files]
    train = "train.jsonl"
    dev = "dev.jsonl"
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from clozeworks.schemas.errors import BadInputError, UsageError

SHAPES = ("single", "pair", "regression", "tokens", "qa", "choice")
# json: one JSON array of objects (KLUE's files); a field may be a dotted path
# ("labels.real-label"). race: a directory of RACE's files (a JSON object per article).
# klue_ner: KLUE-NER's files, a character and its tag per line.
FORMATS = ("tsv", "csv", "jsonl", "json", "conll", "squad", "race", "klue_ner")
METRICS = (
    "accuracy",
    "f1",
    "f1_macro",
    "matthews",
    "pearson",
    "spearman",
    "entity_f1",
    "exact_match",
    "klue_macro_f1",
    "klue_sts_f1",
    "klue_entity_f1",
    "klue_char_f1",
    "klue_re_f1",
    "klue_re_auprc",
    "klue_exact_match",
    "klue_rouge_w",
)
# The metrics of a regression task (the others are of classification or their shape's).
REGRESSION_METRICS = ("pearson", "spearman", "klue_sts_f1")
CLASSIFICATION_METRICS = (
    "accuracy",
    "f1",
    "f1_macro",
    "matthews",
    "klue_macro_f1",
    "klue_re_f1",
    "klue_re_auprc",
)
QA_METRICS = ("f1", "exact_match", "klue_exact_match", "klue_rouge_w")
RECORD_FORMATS = ("jsonl", "json")
# The formats of token tasks and the metrics each can be scored by.
TOKEN_FORMATS = {"conll": ("entity_f1",), "klue_ner": ("klue_entity_f1", "klue_char_f1")}


def _all_token_metrics() -> set[str]:
    return {m for metrics in TOKEN_FORMATS.values() for m in metrics}


@dataclass(frozen=True)
class TaskSpec:
    name: str
    shape: str
    format: str
    text_a: str | int
    label: str | int
    text_b: str | int | None = None
    # The label strings in class order; empty for regression.
    labels: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ("accuracy",)
    files: dict[str, str] = field(default_factory=dict)
    # tsv/csv: whether the first line names the columns (GLUE's CoLA has none).
    header: bool = True
    # "raise": a malformed row is an error naming file and line; "skip": counted and skipped
    # (GLUE's QQP train file has rows with missing columns, which transformers skips too).
    bad_rows: str = "raise"
    # Question answering: SQuAD v2.0's questions may have no answer in their context.
    unanswerable: bool = False
    # Multiple choice: the options' columns (SWAG's ending0..3), or one field holding a
    # list of them; `labels` name the options in order (the gold label is one of them).
    options: tuple[str | int, ...] = ()
    # Relation extraction: the record fields of the subject and the object entity (objects
    # with start_idx, end_idx: inclusive character offsets into text_a, and word), marked
    # in the text with <subj> </subj> <obj> </obj> (klue_re.py).
    entities: tuple[str, ...] = ()
    # Multiple choice: where a question has this blank, the option fills it; otherwise
    # the option follows the question after a space (transformers' RACE and SWAG).
    blank: str | None = None

    def __post_init__(self) -> None:
        where = f"task {self.name!r}"
        if self.shape not in SHAPES:
            raise UsageError(f"{where}: shape {self.shape!r} is not one of {', '.join(SHAPES)}")
        if self.format not in FORMATS:
            raise UsageError(f"{where}: format {self.format!r} is not one of {', '.join(FORMATS)}")
        if self.shape == "pair" and self.text_b is None:
            raise UsageError(f"{where}: a pair task needs text_b")
        if self.shape == "single" and self.text_b is not None:
            raise UsageError(f"{where}: a single-sentence task has no text_b")
        if (self.shape == "qa") != (self.format == "squad"):
            raise UsageError(f"{where}: question answering, and only it, reads SQuAD JSON")
        if self.shape in ("regression", "qa"):
            if self.labels:
                raise UsageError(f"{where}: a {self.shape} task has no label set")
        elif len(self.labels) < 2 or len(set(self.labels)) != len(self.labels):
            raise UsageError(f"{where}: labels must list at least two distinct classes")
        unknown = [m for m in self.metrics if m not in METRICS]
        if unknown or not self.metrics:
            raise UsageError(f"{where}: metrics must be some of {', '.join(METRICS)}")
        if (self.shape == "choice") != (bool(self.options) or self.format == "race"):
            raise UsageError(f"{where}: multiple choice, and only it, has options")
        if self.format == "race" and (self.shape != "choice" or self.options):
            raise UsageError(f"{where}: RACE's files are multiple choice with their own fields")
        if self.entities and (
            len(self.entities) != 2 or self.shape != "single" or self.format not in RECORD_FORMATS
        ):
            raise UsageError(
                f"{where}: entities are two fields (subject, object) of a single-text task "
                "in jsonl or json"
            )
        relations = {"klue_re_f1", "klue_re_auprc"} & set(self.metrics)
        if relations and "no_relation" not in self.labels:
            raise UsageError(f"{where}: {', '.join(sorted(relations))} need the label no_relation")
        if len(self.options) == 1 and self.format not in RECORD_FORMATS:
            raise UsageError(f"{where}: one field holding the options is for jsonl and json")
        if len(self.options) > 1 and len(self.options) != len(self.labels):
            raise UsageError(
                f"{where}: {len(self.options)} option columns, {len(self.labels)} labels"
            )
        if (self.shape == "tokens") != (self.format in TOKEN_FORMATS):
            raise UsageError(
                f"{where}: token tasks, and only they, read {' or '.join(TOKEN_FORMATS)} files"
            )
        if self.format == "conll" and not all(
            isinstance(c, int) for c in (self.text_a, self.label)
        ):
            raise UsageError(f"{where}: conll columns are 0-based indices (-1: the last)")
        token_metrics = TOKEN_FORMATS.get(self.format, ())
        if self.shape == "tokens" and any(m not in token_metrics for m in self.metrics):
            raise UsageError(
                f"{where}: {self.format} tasks' metrics are {', '.join(token_metrics)}"
            )
        if self.shape != "tokens" and any(m in self.metrics for m in _all_token_metrics()):
            raise UsageError(f"{where}: entity metrics are for token tasks")
        if self.format == "klue_ner" and "O" not in self.labels:
            raise UsageError(f"{where}: character tags need the tag O")
        allowed = {"regression": REGRESSION_METRICS, "single": CLASSIFICATION_METRICS,
                   "pair": CLASSIFICATION_METRICS, "choice": CLASSIFICATION_METRICS,
                   "qa": QA_METRICS}.get(self.shape)  # fmt: skip
        if allowed is not None and any(m not in allowed for m in self.metrics):
            raise UsageError(f"{where}: a {self.shape} task's metrics are {', '.join(allowed)}")
        if self.bad_rows not in ("raise", "skip"):
            raise UsageError(f"{where}: bad_rows must be 'raise' or 'skip'")
        if self.format in RECORD_FORMATS and any(
            isinstance(c, int) for c in (self.text_a, self.text_b, self.label, *self.options)
        ):
            raise UsageError(f"{where}: {self.format} columns are field names, not indices")
        columns = (self.text_a, self.text_b, self.label, *self.options)
        names = [c for c in columns if isinstance(c, str)]
        if self.format not in RECORD_FORMATS and not self.header and names:
            raise UsageError(f"{where}: without a header, columns are 0-based indices")

    @property
    def num_outputs(self) -> int:
        if self.shape == "qa":
            return 2  # start and end of the answer
        return 1 if self.shape in ("regression", "choice") else len(self.labels)

    @property
    def main_metric(self) -> str:
        """The score a sweep picks by: the first metric."""
        return self.metrics[0]

    def path(self, data: Path, split: str) -> Path:
        if split not in self.files:
            raise UsageError(
                f"task {self.name!r} has no split {split!r}; it has {', '.join(self.files)}"
            )
        return data / self.files[split]

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["labels"], out["metrics"] = list(self.labels), list(self.metrics)
        out["options"], out["entities"] = list(self.options), list(self.entities)
        return out

    @classmethod
    def from_json(cls, raw: dict[str, Any], where: str = "task") -> TaskSpec:
        known = {f.name for f in fields(cls)}
        extra = sorted(set(raw) - known)
        if extra:
            raise UsageError(f"{where}: unknown key(s) {', '.join(extra)}")
        missing = [k for k in ("name", "shape", "format", "text_a", "label") if k not in raw]
        if missing:
            raise UsageError(f"{where}: missing key(s) {', '.join(missing)}")
        values = dict(raw)
        values["labels"] = tuple(str(v) for v in raw.get("labels", ()))
        values["metrics"] = tuple(raw.get("metrics", ("accuracy",)))
        values["files"] = dict(raw.get("files", {}))
        options = raw.get("options", ())
        values["options"] = (options,) if isinstance(options, str | int) else tuple(options)
        values["entities"] = tuple(raw.get("entities", ()))
        try:
            return cls(**values)
        except TypeError as err:
            raise UsageError(f"{where}: {err}") from None


def _glue(
    name: str,
    shape: str,
    a: str | int,
    b: str | int | None,
    label: str | int,
    labels: tuple[str, ...],
    metrics: tuple[str, ...],
    dev: str = "dev.tsv",
    **kw: Any,
) -> TaskSpec:
    files = {"train": "train.tsv", "dev": dev}
    return TaskSpec(f"glue/{name}", shape, "tsv", a, label, b, labels, metrics, files, **kw)


def _klue() -> tuple[TaskSpec, ...]:
    """KLUE's tasks of the shapes above, reading its released JSON files (v1.1) with the
    fields, label orders and metrics of its baseline (klue_baseline/data, metrics)."""
    files = "klue-{}-v1.1_{}.json"

    def splits(stem: str) -> dict[str, str]:
        return {split: files.format(stem, split) for split in ("train", "dev")}

    ynat = ("정치", "경제", "사회", "생활문화", "세계", "IT과학", "스포츠")
    # Person, location, organization, date, time, quantity; O last, as the baseline's.
    ner = (*(f"{p}-{t}" for t in ("PS", "LC", "OG", "DT", "TI", "QT") for p in "BI"), "O")
    # relation_list.json of the release: no_relation, then the organization's and the
    # person's relations.
    org = (
        "dissolved",
        "founded",
        "place_of_headquarters",
        "alternate_names",
        "member_of",
        "members",
        "political/religious_affiliation",
        "product",
        "founded_by",
        "top_members/employees",
        "number_of_employees/members",
    )
    per = (
        "date_of_birth",
        "date_of_death",
        "place_of_birth",
        "place_of_death",
        "place_of_residence",
        "origin",
        "employee_of",
        "schools_attended",
        "alternate_names",
        "parents",
        "children",
        "siblings",
        "spouse",
        "other_family",
        "colleagues",
        "product",
        "religion",
        "title",
    )
    relations = ("no_relation", *(f"org:{r}" for r in org), *(f"per:{r}" for r in per))
    return (
        TaskSpec("klue/ynat", "single", "json", "title", "label", None, ynat,
                 ("klue_macro_f1",), {s: f"ynat-v1.1_{s}.json" for s in ("train", "dev")}),
        TaskSpec("klue/nli", "pair", "json", "premise", "gold_label", "hypothesis",
                 ("entailment", "contradiction", "neutral"), ("accuracy",),
                 splits("nli")),
        TaskSpec("klue/sts", "regression", "json", "sentence1", "labels.real-label",
                 "sentence2", (), ("pearson", "klue_sts_f1"), splits("sts")),
        TaskSpec("klue/ner", "tokens", "klue_ner", 0, 1, None, ner,
                 ("klue_entity_f1", "klue_char_f1"),
                 {s: f"klue-ner-v1.1_{s}.tsv" for s in ("train", "dev")}, header=False),
        TaskSpec("klue/re", "single", "json", "sentence", "label", None, relations,
                 ("klue_re_f1", "klue_re_auprc"), splits("re"),
                 entities=("subject_entity", "object_entity")),
        # SQuAD 2.0's layout, `guid` for `id`; exact match and ROUGE-W after KLUE's
        # normalization, an unanswerable question's only answer the empty one.
        TaskSpec("klue/mrc", "qa", "squad", "question", "answers",
                 metrics=("klue_exact_match", "klue_rouge_w"), files=splits("mrc"),
                 unanswerable=True),
    )  # fmt: skip


def _choice() -> tuple[TaskSpec, ...]:
    """RACE (Lai et al. 2017) as released (RACE/{train,dev,test}/{middle,high}/*.txt), the
    middle and high school sets together as ALBERT and ELECTRA report it, and each alone;
    SWAG (Zellers et al. 2018) as released (train.csv, val.csv). How an option joins its
    question is transformers' (`utils_multiple_choice.py`, `run_swag.py`)."""
    race = [
        TaskSpec(
            name,
            "choice",
            "race",
            "article",
            "answer",
            "question",
            ("A", "B", "C", "D"),
            ("accuracy",),
            {s: f"{s}{part}" for s in ("train", "dev", "test")},
            blank="_",
        )
        for name, part in (("race", ""), ("race/middle", "/middle"), ("race/high", "/high"))
    ]
    endings = tuple(f"ending{i}" for i in range(4))
    swag = TaskSpec(
        "swag",
        "choice",
        "csv",
        "sent1",
        "label",
        "sent2",
        ("0", "1", "2", "3"),
        ("accuracy",),
        {"train": "train.csv", "dev": "val.csv"},
        options=endings,
    )
    return (*race, swag)  # fmt: skip


_ENTAIL = ("entailment", "not_entailment")
_NLI = ("contradiction", "entailment", "neutral")
BUILTIN: dict[str, TaskSpec] = {
    t.name: t
    for t in (
        # CoLA's files have no header: source, label, original label, sentence.
        _glue("cola", "single", 3, None, 1, ("0", "1"), ("matthews",), header=False),
        _glue("sst2", "single", "sentence", None, "label", ("0", "1"), ("accuracy",)),
        _glue("mrpc", "pair", "#1 String", "#2 String", "Quality", ("0", "1"), ("f1", "accuracy")),
        _glue(
            "qqp",
            "pair",
            "question1",
            "question2",
            "is_duplicate",
            ("0", "1"),
            ("f1", "accuracy"),
            bad_rows="skip",
        ),
        _glue("stsb", "regression", "sentence1", "sentence2", "score", (), ("pearson", "spearman")),
        *(
            _glue(
                name, "pair", "sentence1", "sentence2", "gold_label", _NLI, ("accuracy",), dev=dev
            )
            for name, dev in (("mnli", "dev_matched.tsv"), ("mnli-mm", "dev_mismatched.tsv"))
        ),
        _glue("qnli", "pair", "question", "sentence", "label", _ENTAIL, ("accuracy",)),
        _glue("rte", "pair", "sentence1", "sentence2", "label", _ENTAIL, ("accuracy",)),
        _glue("wnli", "pair", "sentence1", "sentence2", "label", ("0", "1"), ("accuracy",)),
        # CoNLL-2003's files: word, POS, chunk, NER tag per line (IOB1), blank lines between
        # sentences, -DOCSTART- lines between documents.
        TaskSpec(
            "conll2003",
            "tokens",
            "conll",
            0,
            -1,
            labels=tuple(
                ["O"] + [f"{p}-{t}" for t in ("PER", "ORG", "LOC", "MISC") for p in ("B", "I")]
            ),
            metrics=("entity_f1",),
            files={"train": "train.txt", "dev": "valid.txt", "test": "test.txt"},
            header=False,
        ),
        *_klue(),
        *_choice(),
        # SQuAD's JSON as released; F1 first, as BERT reports and picks by it.
        *(
            TaskSpec(
                name,
                "qa",
                "squad",
                "question",
                "answers",
                metrics=("f1", "exact_match"),
                files={"train": f"train-v{v}.json", "dev": f"dev-v{v}.json"},
                unanswerable=v == "2.0",
            )
            for name, v in (("squad", "1.1"), ("squad2", "2.0"))
        ),
    )
}


def load_task(name_or_path: str) -> TaskSpec:
    """A built-in task by name (`glue/mrpc`) or a TOML task file."""
    if name_or_path in BUILTIN:
        return BUILTIN[name_or_path]
    path = Path(name_or_path)
    if not path.is_file():
        raise UsageError(
            f"--task {name_or_path}: neither a task file nor a built-in task "
            f"({', '.join(sorted(BUILTIN))})"
        )
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise BadInputError(f"{path}: not a TOML task file: {err}") from None
    return TaskSpec.from_json(raw, str(path))
