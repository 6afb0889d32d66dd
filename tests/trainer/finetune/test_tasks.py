"""Task files as the benchmarks ship them, and every bad row named by file and line."""

import pytest

from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.trainer.finetune.readers import read_examples
from clozeworks.trainer.finetune.tasks import BUILTIN, TaskSpec, load_task


def write(path, lines) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_glue_cola_has_no_header_and_keeps_quotes_as_text(tmp_path) -> None:
    write(
        tmp_path / "train.tsv",
        ["gj04\t1\t\tOur friends won't buy this analysis.", 'gj04\t0\t*\tHe said "hi it.'],
    )
    ex = read_examples(BUILTIN["glue/cola"], tmp_path, "train")
    assert [(e.text_a, e.label, e.line) for e in ex.items] == [
        ("Our friends won't buy this analysis.", 1.0, 1),
        ('He said "hi it.', 0.0, 2),
    ]


def test_glue_mnli_reads_gold_label_by_name_and_dev_matched(tmp_path) -> None:
    header = "\t".join(
        [
            "index",
            "promptID",
            "pairID",
            "genre",
            "s1b",
            "s2b",
            "s1p",
            "s2p",
            "sentence1",
            "sentence2",
            "label1",
            "gold_label",
        ]
    )
    write(
        tmp_path / "dev_matched.tsv",
        [header, "0\t1\t1n\tgov\tx\tx\tx\tx\tA cat.\tAn animal.\tneutral\tneutral"],
    )
    ex = read_examples(BUILTIN["glue/mnli"], tmp_path, "dev")
    assert [(e.text_a, e.text_b, e.label) for e in ex.items] == [("A cat.", "An animal.", 2.0)]
    assert BUILTIN["glue/mnli-mm"].files["dev"] == "dev_mismatched.tsv"


def test_glue_stsb_scores_are_numbers_or_an_error_with_the_line(tmp_path) -> None:
    header = (
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
    )
    row = "0\tmain\tf\t2012\t1\tnone\tnone\tA plane takes off.\tAn air plane is taking off.\t{}"
    write(tmp_path / "train.tsv", [header, row.format("5.000"), row.format("high")])
    with pytest.raises(BadInputError, match=r"train.tsv:3: score 'high' is not a number"):
        read_examples(BUILTIN["glue/stsb"], tmp_path, "train")
    write(tmp_path / "train.tsv", [header, row.format("3.8")])
    assert read_examples(BUILTIN["glue/stsb"], tmp_path, "train").items[0].label == 3.8


def test_glue_qqp_skips_and_counts_short_rows(tmp_path) -> None:
    header = "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"
    write(
        tmp_path / "train.tsv",
        [header, "1\t1\t2\tHow?\tWhy?\t0", "2\t3\t4\tbroken row", "3\t5\t6\tA?\tB?\t1"],
    )
    ex = read_examples(BUILTIN["glue/qqp"], tmp_path, "train")
    assert [e.label for e in ex.items] == [0.0, 1.0] and ex.skipped == 1


def test_mrpc_short_row_is_an_error_and_a_missing_column_names_the_header(tmp_path) -> None:
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
    write(tmp_path / "train.tsv", [header, "1\t1\t2\tA.\tB.", "0\t3\t4\tonly one"])
    with pytest.raises(BadInputError, match=r"train.tsv:3: 4 columns, column 4 wanted"):
        read_examples(BUILTIN["glue/mrpc"], tmp_path, "train")
    write(tmp_path / "train.tsv", ["Quality\tA\tB", "1\tx\ty"])
    with pytest.raises(BadInputError, match=r"train.tsv:1: header has no column '#1 String'"):
        read_examples(BUILTIN["glue/mrpc"], tmp_path, "train")
    with pytest.raises(BadInputError, match=r"dev.tsv: no such file \(glue/mrpc's dev split\)"):
        read_examples(BUILTIN["glue/mrpc"], tmp_path, "dev")


def test_a_toml_task_reads_jsonl_and_csv(tmp_path) -> None:
    toml = tmp_path / "reviews.toml"
    toml.write_text(
        'name = "reviews"\nshape = "pair"\nformat = "jsonl"\ntext_a = "title"\ntext_b = "body"\n'
        'label = "stars"\nlabels = ["1", "2", "3"]\nmetrics = ["accuracy", "f1_macro"]\n'
        '[files]\ntrain = "train.jsonl"\n',
        encoding="utf-8",
    )
    spec = load_task(str(toml))
    write(
        tmp_path / "train.jsonl",
        ['{"title": "Nice", "body": "Works.", "stars": 3}', "", '{"title": "Bad"}'],
    )
    with pytest.raises(BadInputError, match=r"train.jsonl:3: no field 'body'"):
        read_examples(spec, tmp_path, "train")
    write(tmp_path / "train.jsonl", ['{"title": "Nice", "body": "Works.", "stars": 3}', "[1]"])
    with pytest.raises(BadInputError, match=r"train.jsonl:2: not an object"):
        read_examples(spec, tmp_path, "train")
    csv_spec = TaskSpec(
        "c", "single", "csv", "text", "y", labels=("no", "yes"), files={"train": "t.csv"}
    )
    write(tmp_path / "t.csv", ["text,y", '"Hello, world",yes', "plain,no"])
    ex = read_examples(csv_spec, tmp_path, "train")
    assert [(e.text_a, e.label, e.line) for e in ex.items] == [
        ("Hello, world", 1.0, 2),
        ("plain", 0.0, 3),
    ]


def test_task_definitions_are_checked() -> None:
    with pytest.raises(UsageError, match="neither a task file nor a built-in task"):
        load_task("glue/nope")
    with pytest.raises(UsageError, match="a pair task needs text_b"):
        TaskSpec("t", "pair", "tsv", "a", "y", labels=("0", "1"))
    with pytest.raises(UsageError, match="at least two distinct classes"):
        TaskSpec("t", "single", "tsv", "a", "y", labels=("0",))
    with pytest.raises(UsageError, match="without a header, columns are 0-based indices"):
        TaskSpec("t", "single", "tsv", "a", "y", labels=("0", "1"), header=False)
    with pytest.raises(UsageError, match="unknown key"):
        TaskSpec.from_json(
            {"name": "t", "shape": "single", "format": "tsv", "text_a": 0, "label": 1, "lables": []}
        )
    regression = TaskSpec("t", "regression", "tsv", "a", "y", metrics=("pearson",))
    assert regression.num_outputs == 1 and regression.main_metric == "pearson"
