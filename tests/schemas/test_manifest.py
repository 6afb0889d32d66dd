import json

import pytest

from clozeworks.schemas.errors import BadInputError, SchemaError
from clozeworks.schemas.manifest import FORMAT_VERSION, Manifest, ShardInfo, read_manifest
from clozeworks.schemas.masking import MaskingSettings

SHA = "ab" * 32


def make_manifest(**overrides: object) -> Manifest:
    fields: dict[str, object] = dict(
        mode="nsp",
        max_seq_len=128,
        vocab_size=30522,
        vocab_kind="wordpiece",
        tokenizer_sha256=SHA,
        special_tokens={"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4},
        seed=7,
        block_size=4,
        premask=MaskingSettings(kind="wwm", max_predictions=20),
        dupe_factor=5,
        settings={"short_seq_prob": 0.1},
        stats={"truncated": 3},
        shards=(
            ShardInfo("shard-000000.tar", 9, 900, 3, 10240, SHA),
            ShardInfo("shard-000001.tar", 8, 800, 2, 10240, SHA),
        ),
    )
    fields.update(overrides)
    return Manifest(**fields)  # type: ignore[arg-type]


def test_round_trip_keeps_every_field() -> None:
    manifest = make_manifest()
    again = Manifest.from_json(manifest.to_json())
    assert again == manifest
    assert again.sequences == 17 and again.tokens == 1700
    assert json.loads(manifest.to_json())["totals"]["sequences"] == 17


def test_round_trip_without_premask() -> None:
    manifest = make_manifest(premask=None, dupe_factor=1, mode="full-sentences")
    assert Manifest.from_json(manifest.to_json()) == manifest


def edited(**changes: object) -> str:
    data = make_manifest().to_dict()
    data.update(changes)
    return json.dumps(data)


def test_newer_version_is_refused_with_upgrade_hint() -> None:
    with pytest.raises(SchemaError, match="newer than this clozeworks reads"):
        Manifest.from_json(edited(version=FORMAT_VERSION + 1), "x/manifest.json")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"mode": "mlm"}, "mode"),
        ({"max_seq_len": "128"}, "max_seq_len"),
        ({"vocab_size": True}, "vocab_size"),
        ({"tokenizer_sha256": "xyz"}, "tokenizer_sha256"),
        ({"format": "something-else"}, "format"),
        ({"special_tokens": {"pad": 0, "unk": 1, "cls": 2, "sep": 3}}, "special_tokens.mask"),
        (
            {"special_tokens": {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 99999}},
            "special_tokens.mask",
        ),
        ({"token_dtype": "uint16", "vocab_size": 70000}, "token_dtype"),
        # Past the ceilings: what a reader or the trainer would allocate from them.
        ({"token_dtype": "uint32", "vocab_size": 1 << 30}, "vocab_size"),
        ({"max_seq_len": 10**9}, "max_seq_len"),
        ({"block_size": 10**9}, "block_size"),
        (
            {"premask": {"kind": "bogus", "prob": 0.15, "mask_ratio": 0.8, "random_ratio": 0.1}},
            "premask.kind",
        ),
    ],
)
def test_bad_field_is_named(changes: dict[str, object], field: str) -> None:
    with pytest.raises(SchemaError) as info:
        Manifest.from_json(edited(**changes), "d/manifest.json")
    assert info.value.field == field
    assert str(info.value).startswith("d/manifest.json: field ")


def test_bad_shard_entry_is_named_with_its_index() -> None:
    data = make_manifest().to_dict()
    data["shards"][1]["sha256"] = "not-a-hash"
    with pytest.raises(SchemaError) as info:
        Manifest.from_dict(data)
    assert info.value.field == "shards[1].sha256"


def test_unbalanced_shards_are_refused() -> None:
    data = make_manifest().to_dict()
    data["shards"][1]["sequences"] = 5
    data["shards"][1]["blocks"] = 2
    with pytest.raises(SchemaError, match="differ by more than one"):
        Manifest.from_dict(data)


def test_block_count_must_match_sequences() -> None:
    data = make_manifest().to_dict()
    data["shards"][0]["blocks"] = 1
    with pytest.raises(SchemaError, match="blocks cannot hold"):
        Manifest.from_dict(data)


@pytest.mark.parametrize("key", ["sequences", "tokens", "bytes"])
def test_totals_that_disagree_with_the_shards_are_refused(key) -> None:
    data = make_manifest().to_dict()
    data["totals"][key] += 1000
    with pytest.raises(SchemaError, match=rf"totals\.{key}.*says"):
        Manifest.from_dict(data)
    del data["totals"]  # older manifests may not carry totals at all
    assert Manifest.from_dict(data) == make_manifest()


def test_not_json_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="not valid JSON"):
        Manifest.from_json("{nope", "m.json")


def test_a_manifest_nested_past_the_parser_is_a_schema_error() -> None:
    deep = '{"format": ' + "[" * 200_000 + "]" * 200_000 + "}"
    with pytest.raises(SchemaError, match=r"m\.json.*nested too deeply to be a manifest"):
        Manifest.from_json(deep, "m.json")


def test_a_nested_manifest_is_one_line_for_inspect_and_train(tmp_path, capsys) -> None:
    from clozeworks.cli import main

    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / ".manifest.json").write_text("[" * 200_000 + "]" * 200_000)
    assert main(["inspect", str(shards), "--verify"]) != 0
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "nested too deeply to be a manifest" in err, err[-500:]
    argv = ["train", "--data", str(shards), "--output", str(tmp_path / "run"), "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "nested too deeply to be a manifest" in err, err[-500:]


def test_directory_without_manifest_is_not_a_dataset(tmp_path) -> None:
    (tmp_path / "shard-000000.tar").write_bytes(b"")
    with pytest.raises(BadInputError, match=r"no \.manifest\.json"):
        read_manifest(tmp_path)
    with pytest.raises(BadInputError, match="no such shard directory"):
        read_manifest(tmp_path / "missing")
