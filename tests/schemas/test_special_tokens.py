import pytest

from clozeworks.schemas.masking import MaskingSettings
from clozeworks.schemas.special_tokens import VOCAB_KINDS, special_tokens_for


def test_every_kind_has_five_distinct_roles_in_its_order() -> None:
    for kind in VOCAB_KINDS:
        sp = special_tokens_for(kind)
        assert sorted(sp.order) == sorted(sp.roles().values())
        assert len(set(sp.order)) == 5


def test_wordpiece_follows_bert_and_bpe_follows_roberta() -> None:
    assert special_tokens_for("wordpiece").order == ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    assert special_tokens_for("bpe").order[:4] == ("<s>", "<pad>", "</s>", "<unk>")


def test_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown vocabulary kind"):
        special_tokens_for("sentencepiece")


def test_masking_settings_reject_impossible_ratios() -> None:
    with pytest.raises(ValueError):
        MaskingSettings(mask_ratio=0.8, random_ratio=0.3)
    with pytest.raises(ValueError):
        MaskingSettings(prob=0.0)
    assert MaskingSettings().keep_ratio == pytest.approx(0.1)
