"""Chinese, Japanese and Korean through `cloze shard` and the trainer's loader (issue 36,
item 4): NSP pairs are cut at the language's sentence ends, and whole-word masking, static
(`--premask wwm`) or dynamic, masks the language's words: the segmenter's for Chinese and
Japanese, the space-separated ones for Korean."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch

from clozeworks.cli import main
from clozeworks.corpus.shards.blocks import iter_blocks
from clozeworks.corpus.shards.words import segmented_words
from clozeworks.corpus.vocab.train import load_tokenizer
from clozeworks.schemas.manifest import read_manifest
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.data.loader import ShardDataset
from tests.conftest import write_jsonl
from tests.corpus.shards.test_words import JAPANESE_MORE, TEXTS

pytest.importorskip("jieba")
pytest.importorskip("fugashi")

SENTENCE_END = {"zh": "。", "ja": "。", "ko": "."}


def _documents(language: str) -> list[str]:
    """Twenty documents of four to six sentences each, from the test's prose."""
    lines = TEXTS[language].splitlines() if language != "ja" else JAPANESE_MORE.splitlines()
    if language == "ko":
        lines = [s.strip() + "." for s in TEXTS["ko"].split(".") if s.strip()]
    cycle = itertools.cycle(lines)
    glue = " " if language == "ko" else ""
    return [glue.join(next(cycle) for _ in range(4 + i % 3)) for i in range(20)]


@pytest.fixture(scope="module", params=["zh", "ja", "ko"])
def built(request, tmp_path_factory) -> tuple[str, Path, Path]:
    language = request.param
    tmp = tmp_path_factory.mktemp(language)
    write_jsonl(tmp / "raw" / "a.jsonl", [{"text": t} for t in _documents(language)])
    steps = [
        ["clean", "--input", str(tmp / "raw"), "--output", str(tmp / "docs")],
        ["--language", language, "--filters", "length"],
        ["vocab", "--input", str(tmp / "docs"), "--output", str(tmp / "tok")],
        ["--vocab-size", "500", "--min-frequency", "1"],
        ["shard", "--input", str(tmp / "docs"), "--tokenizer", str(tmp / "tok")],
        ["--output", str(tmp / "nsp"), "--mode", "nsp", "--max-seq-len", "64"],
        ["--language", language, "--premask", "wwm", "--dupe-factor", "2"],
        ["shard", "--input", str(tmp / "docs"), "--tokenizer", str(tmp / "tok")],
        ["--output", str(tmp / "packed"), "--mode", "full-sentences", "--max-seq-len", "64"],
        ["--language", language],
    ]
    for a, b in ((0, 2), (2, 4), (4, 7), (7, 10)):
        argv = [arg for part in steps[a:b] for arg in part]
        assert main([*argv, "--no-progress"]) == 0, argv
    return language, tmp / "nsp", tmp / "packed"


def _words(tokenizer_dir: Path, language: str, ids: np.ndarray) -> np.ndarray:
    """[L] the word number of every position of one sequence (0 on specials), by the
    language's segmenter, or by the vocabulary's marks where words have spaces."""
    info = load_tokenizer(tokenizer_dir)
    special = np.isin(ids, info.all_special_ids)
    words = segmented_words(language, info.tokens(), info.special)
    if words is None:
        table = np.asarray(info.word_start_table())
        starts = table[ids] & ~special
    else:
        starts = words.starts(ids[None, :], ~special[None, :])[0]
    after_special = np.concatenate([[True], special[:-1]])
    return np.where(special, 0, np.cumsum((starts | after_special) & ~special))


def _whole(words: np.ndarray, predicted: np.ndarray) -> bool:
    return all(predicted[words == w].all() for w in np.unique(words[predicted]))


def test_pairs_end_at_sentence_ends_and_premasks_take_whole_words(built) -> None:
    language, nsp, _ = built
    manifest = read_manifest(nsp)
    assert manifest.settings["language"] == language
    tokenizer = nsp / ".tokenizer"
    info = load_tokenizer(tokenizer)
    end = info.tokenizer.token_to_id(SENTENCE_END[language])
    sep = manifest.special_tokens["sep"]
    pairs = ends = whole = multi = 0
    for shard in manifest.shards:
        for _, block in iter_blocks(nsp / shard.name):
            for i in range(len(block)):
                seq = block.sequence(i).astype(np.int64)
                positions, labels = block.predictions(i)
                original = seq.copy()
                original[positions] = labels
                first_sep = int(np.nonzero(original == sep)[0][0])
                pairs += 1
                ends += original[first_sep - 1] == end
                predicted = np.zeros(len(seq), dtype=bool)
                predicted[positions] = True
                words = _words(tokenizer, language, original)
                whole += _whole(words, predicted)
                multi += any((words == w).sum() > 1 for w in np.unique(words[predicted]))
    assert pairs > 20 and whole == pairs
    # Segment A is whole sentences unless a one-sentence chunk was cut or the pair truncated
    # (60-80% here); with the document one sentence it would rarely end at a full stop.
    assert ends > pairs / 2, (ends, pairs)
    if language != "ko":  # Chinese words of several characters are masked together
        assert multi > pairs // 4


def test_shard_takes_the_stores_language_unless_told(built, tmp_path) -> None:
    """The store was cleaned with --language: shard splits and masks in it by default;
    a store without one (or mixed) is sharded as English."""
    language, nsp, _ = built
    docs = nsp.parent / "docs"
    tok = nsp.parent / "tok"
    argv = ["shard", "--input", str(docs), "--tokenizer", str(tok), "--no-progress"]
    assert main([*argv, "--output", str(tmp_path / "own"), "--mode", "single"]) == 0
    assert read_manifest(tmp_path / "own").settings["language"] == language
    told = [*argv, "--output", str(tmp_path / "told"), "--mode", "single", "--language", "en"]
    assert main(told) == 0
    assert read_manifest(tmp_path / "told").settings["language"] == "en"


def test_a_store_without_a_language_is_sharded_as_english(small_build) -> None:
    from clozeworks.corpus.shards.settings import store_language
    from clozeworks.schemas.stats import StoreStats

    _, manifest = small_build
    assert manifest.settings["language"] == "en"
    mixed = {"ko": {"documents": 6}, "en": {"documents": 6}}
    assert store_language(StoreStats("clean", 12, 12, details={"languages": mixed})) == "en"
    nearly = {"ja": {"documents": 95}, "und": {"documents": 5}}
    assert store_language(StoreStats("clean", 100, 100, details={"languages": nearly})) == "ja"


def test_dynamic_whole_word_masking_takes_whole_words(built) -> None:
    language, _, packed = built
    for kind in ("wwm", "ngram"):
        ds = ShardDataset(packed, batch_size=8, seed=5, masking=MaskingSettings(kind=kind))
        assert (ds.masker.tables.words is None) == (language == "ko")
        checked = 0
        for batch in itertools.islice(ds.loader(), 4):
            labels = batch["labels"]
            original = torch.where(labels != -100, labels, batch["input_ids"])
            for row, lab, attention in zip(original, labels, batch["attention_mask"], strict=True):
                n = int(attention.sum())
                ids = row[:n].numpy()
                words = _words(packed / ".tokenizer", language, ids)
                assert _whole(words, lab[:n].numpy() != -100)
                checked += 1
        assert checked > 8
