"""The objective registry: one entry per objective name, and what each entry decides."""

import pytest
import torch

from clozeworks.schemas.errors import UsageError
from clozeworks.schemas.kinds import OBJECTIVES
from clozeworks.trainer.data.objective_specs import (
    OBJECTIVE_SPECS,
    OWN_TARGETS,
    PERPLEXITY,
    check_shards,
    objective_counts,
    target_maker,
)
from tests.schemas.test_manifest import make_manifest


def test_every_objective_name_has_one_entry() -> None:
    assert tuple(OBJECTIVE_SPECS) == OBJECTIVES
    assert OWN_TARGETS == ("clm", "t5", "plm", "bart")
    assert PERPLEXITY == ("mlm", "clm", "t5", "plm", "bart")


def test_counts_follow_each_objectives_predictions() -> None:
    labels = torch.tensor([[-100, 5, -100, 7], [-100, -100, 9, -100]])
    batch = {
        "input_ids": torch.zeros(2, 4, dtype=torch.long),
        "attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
        "labels": labels,
        "wso_labels": torch.tensor([[-100, 1, 2, -100], [-100, -100, -100, -100]]),
    }
    names = ("mlm", "nsp", "sbo", "wso", "rtd", "clm")
    assert objective_counts(batch, names) == [3, 2, 3, 2, 7, 3]
    del batch["wso_labels"]
    assert objective_counts(batch, ("wso",)) == [0]


def test_the_first_own_target_objective_picks_the_maker() -> None:
    assert target_maker(("mlm", "nsp")) is None
    assert target_maker(("t5",)) is OBJECTIVE_SPECS["t5"].targets


@pytest.mark.parametrize(
    ("objectives", "manifest", "says"),
    [
        (
            ("mlm", "sop"),
            make_manifest(mode="nsp"),
            "objective sop needs shards built with --mode sop",
        ),
        (("mlm", "sbo"), make_manifest(mode="full-sentences"), "sbo needs dynamic masking"),
        (("mlm", "sbo", "wso"), make_manifest(mode="full-sentences"), "sbo and wso need dynamic"),
        (
            ("clm",),
            make_manifest(mode="nsp", premask=None, dupe_factor=1),
            "clm reads running text",
        ),
    ],
)
def test_shards_that_cannot_feed_the_objectives_are_one_error(objectives, manifest, says) -> None:
    with pytest.raises(UsageError, match=says):
        check_shards(objectives, manifest, "d")


def test_shards_that_can_are_accepted() -> None:
    plain = make_manifest(mode="full-sentences", premask=None, dupe_factor=1)
    check_shards(("mlm", "sbo", "wso"), plain, "d")
    check_shards(("clm",), plain, "d")
