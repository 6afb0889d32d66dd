"""Korean sentences without full stops (`cloze shard --sentence-splitter kss`): kss's
MeCab backend finds the sentence ends sentencex cannot, the sentences still hold every
word of the document in order, and the manifest says which splitter cut them."""

from __future__ import annotations

import json

import pytest

from clozeworks.cli import main
from clozeworks.corpus.shards.settings import ShardSettings
from clozeworks.corpus.shards.tokenize import DocumentEncoder
from clozeworks.corpus.text.sentences import split_sentences
from clozeworks.corpus.vocab.train import VocabConfig, train_tokenizer
from clozeworks.schemas.errors import SettingError
from clozeworks.schemas.sidecars import MANIFEST_FILE
from tests.conftest import write_jsonl

pytest.importorskip("kss")
pytest.importorskip("mecab")

# As comments and chat are written: sentence-final endings, no full stops.
CHAT = [
    "오늘 학교에 갔어 친구를 만났어 정말 재밌었어",
    "어제 비가 많이 왔어요 우산을 안 가져가서 다 젖었어요 감기에 걸릴 것 같아요",
    "이 영화 진짜 좋네요 배우들 연기가 최고예요 다음 주에 또 보러 갈래요",
    "배고파 뭐 먹을까 떡볶이 어때 좋아 그럼 가자",
]


def test_kss_finds_the_ends_sentencex_cannot() -> None:
    for text in CHAT:
        ours = split_sentences(text, "ko", "kss")
        assert split_sentences(text, "ko") == [text]  # no stop, no boundary
        assert len(ours) >= 2, ours
        assert " ".join(ours).split() == text.split()
    assert split_sentences(CHAT[0], "ko", "kss") == [
        "오늘 학교에 갔어 친구를 만났어",
        "정말 재밌었어",
    ]


def test_the_encoder_splits_with_kss() -> None:
    tok = train_tokenizer(CHAT * 20, VocabConfig(vocab_size=200))
    rules = DocumentEncoder(tok, "ko").encode(CHAT)
    kss = DocumentEncoder(tok, "ko", "kss").encode(CHAT)
    assert kss.documents[-1] > rules.documents[-1]  # more sentences
    assert kss.ids.tolist() == rules.ids.tolist()  # the same tokens, cut otherwise


def test_kss_is_for_korean() -> None:
    with pytest.raises(SettingError, match="kss splits Korean"):
        ShardSettings(sentence_splitter="kss", language="en").validate()
    ShardSettings(sentence_splitter="kss", language="ko").validate()


def test_cloze_shard_with_kss(tmp_path) -> None:
    docs = [" ".join(CHAT[i % 4 :] + CHAT[: i % 4]) for i in range(40)]
    write_jsonl(tmp_path / "raw" / "a.jsonl", [{"text": t} for t in docs])
    store, tok = tmp_path / "docs", tmp_path / "tok"
    quiet = ["--no-progress"]
    assert main(["clean", "--input", str(tmp_path / "raw"), "--output", str(store), *quiet]) == 0
    assert (
        main(["vocab", "--input", str(store), "--output", str(tok), "--vocab-size", "300", *quiet])
        == 0
    )
    shard = ["shard", "--input", str(store), "--tokenizer", str(tok), "--mode", "nsp"]
    out = tmp_path / "shards"
    argv = [*shard, "--output", str(out), "--language", "ko", "--sentence-splitter", "kss"]
    assert main([*argv, *quiet]) == 0
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert manifest["settings"]["sentence_splitter"] == "kss"
    assert main([*shard, "--output", str(tmp_path / "en"), "--language", "en",
                 "--sentence-splitter", "kss", *quiet]) == 2  # fmt: skip
