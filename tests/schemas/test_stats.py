"""stats.json and vocab_stats.json as typed records: what a stage writes reads back the
same, and a file no stage could have written is refused with the field named."""

import pytest

from clozeworks.schemas.errors import BadInputError, SchemaError
from clozeworks.schemas.stats import MAX_UPSTREAM, StoreStats, VocabStats

CLEAN = {
    "stage": "clean",
    "inputs": ["raw"],
    "documents_in": 10,
    "documents_out": 7,
    "bytes_in": 1000,
    "bytes_out": 700,
    "dropped.too_short": 2,
    "dropped.bad_json": 1,
}


def test_a_store_record_round_trips_with_its_upstream() -> None:
    clean = StoreStats.from_json(CLEAN, "clean/stats.json")
    assert clean.dropped == {"too_short": 2, "bad_json": 1} and clean.details == {"inputs": ["raw"]}
    dedup = {
        "stage": "dedup",
        "documents_in": 7,
        "documents_out": 5,
        "duplicates": 2,
        "duplicates.exact": 2,
        "upstream": clean.to_json(),
    }
    stats = StoreStats.from_json(dedup, "docs/stats.json")
    assert stats.upstream == clean and stats.duplicates == 2
    assert StoreStats.from_json(stats.to_json(), "again") == stats
    assert stats.to_json()["version"] == 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"documents_in": 11}, "documents_in"),  # 7 + 3 dropped is 10, not 11
        ({"dropped.too_short": -1}, "dropped.too_short"),
        ({"documents_out": "7"}, "documents_out"),
        ({"version": 2}, "version"),
    ],
)
def test_a_record_no_stage_wrote_is_refused_naming_the_field(change, field) -> None:
    with pytest.raises(SchemaError, match=f"field '{field}'"):
        StoreStats.from_json({**CLEAN, **change}, "x/stats.json")


def _nested(depth: int) -> str:
    """A stats.json whose upstreams go `depth` deep (built as text: json.dumps recurses)."""
    link = '{"stage": "dedup", "documents_in": 1, "documents_out": 1, "upstream": '
    leaf = '{"stage": "clean", "documents_in": 1, "documents_out": 1}'
    return link * depth + leaf + "}" * depth


def test_a_deep_chain_of_upstreams_is_refused_not_recursed() -> None:
    assert StoreStats.read(_nested(MAX_UPSTREAM), "ok").upstream is not None
    with pytest.raises(SchemaError, match=f"nested more than {MAX_UPSTREAM} deep"):
        StoreStats.read(_nested(MAX_UPSTREAM + 1), "deep")
    with pytest.raises(BadInputError, match="deeper: nested too deep"):
        StoreStats.read(_nested(100_000), "deeper")


def test_not_json_is_a_bad_input() -> None:
    with pytest.raises(BadInputError, match=r"x/stats\.json: not valid JSON"):
        StoreStats.read("{", "x/stats.json")


def test_vocab_stats_round_trip_and_are_checked() -> None:
    data = {
        "version": 1,
        "kind": "wordpiece",
        "vocab_size": 8000,
        "lowercase": True,
        "input": "docs",
        "sample": {
            "seed": 0,
            "rate": 0.5,
            "documents": 10,
            "bytes": 100,
            "sample_docs": None,
            "sample_bytes": 1000,
            "store_documents": 20,
        },
        "heldout": {"rate": 0.05, "documents": 1, "unk_rate": 0.0},
    }
    stats = VocabStats.from_json(data, "v")
    assert stats.to_json() == data
    with pytest.raises(SchemaError, match=r"field 'sample\.rate'"):
        VocabStats.from_json({**data, "sample": {**data["sample"], "rate": 2.0}}, "v")
