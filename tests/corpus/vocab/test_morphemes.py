"""Morpheme-aware vocabularies (KLUE's recipe): trained on Korean cut at its morphemes by a
real analyzer, written as a tokenizer.json that reads raw text with no analyzer, whose
pieces fall on morpheme boundaries more often than the same kind trained on words."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer

from clozeworks.cli import main
from clozeworks.corpus.vocab.morphemes import MARK, boundaries, mark
from clozeworks.corpus.vocab.train import VocabConfig, train_tokenizer, untrained_tokenizer
from tests.conftest import write_jsonl
from tests.env import ROOT, python_path

pytest.importorskip("mecab")
pytest.importorskip("kiwipiepy")

NOUNS = [
    *[
        "학교",
        "친구",
        "도서관",
        "선생님",
        "사람",
        "책",
        "음식",
        "하늘",
        "바다",
        "나무",
        "정부",
        "회사",
        "시장",
        "학생",
        "가족",
    ],
    *[
        "동생",
        "기차",
        "공원",
        "음악",
        "영화",
        "신문",
        "편지",
        "컴퓨터",
        "자동차",
        "대학교",
        "병원",
        "은행",
        "식당",
        "교실",
    ],
]
PARTICLES = ["가", "를", "에서", "에게", "의", "는", "도", "로", "와", "보다", "까지", "부터", "만"]
STEMS = ["먹", "읽", "받", "찾", "만들", "배우", "기다리", "가르치", "보내", "열"]
ENDINGS = ["었다", "습니다", "고", "는다", "으면", "어서", "겠다", "었습니다", "지만", "는데"]


def korean(n: int, seed: int) -> list[str]:
    """`n` short documents of nouns with particles and verbs with endings, as spaced
    Korean writes them (a word is a stem and what is attached to it)."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n):
        words = []
        for _ in range(rng.randrange(6, 14)):
            if rng.random() < 0.6:
                words.append(rng.choice(NOUNS) + rng.choice(PARTICLES))
            else:
                words.append(rng.choice(STEMS) + rng.choice(ENDINGS))
        docs.append(" ".join(words) + ".")
    return docs


@pytest.mark.parametrize("analyzer", ["mecab", "kiwi"])
def test_boundaries_lie_inside_words(analyzer: str) -> None:
    text = "아버지가 방에 들어가신다. 밥을 먹었습니다 했다"
    cuts = boundaries(text, analyzer)
    assert cuts and all(not text[i - 1].isspace() and not text[i].isspace() for i in cuts)
    assert text.index("가 방") in cuts  # 아버지|가
    assert text.index("습니다") in cuts  # 먹었|습니다 or 먹|었|습니다
    assert text.index("했") not in cuts  # a word's first syllable starts no boundary
    marked = mark(text + MARK, analyzer)
    assert marked.replace(MARK, "") == text
    assert marked.count(MARK) == len(cuts)


def _agreement(tok: Tokenizer, texts: list[str]) -> tuple[float, float, int]:
    """(the share of cuts between pieces inside a word that fall on the analyzer's
    morpheme boundaries, the share of those boundaries that are such cuts, the cuts)."""
    on = cuts = bounds = 0
    for text in texts:
        offsets = tok.encode(text, add_special_tokens=False).offsets
        found = set(boundaries(text, "mecab"))
        inside = {
            end
            for (_, end), (start, _) in itertools.pairwise(offsets)
            if end == start and 0 < end < len(text) and not text[end - 1].isspace()
        }
        on, cuts, bounds = on + len(inside & found), cuts + len(inside), bounds + len(found)
    return on / cuts, on / bounds, cuts


# How much more of the morpheme boundaries a morpheme vocabulary cuts at than the same
# kind trained on words, on the held-out texts below. Measured (precision, recall; the
# words' recall): wordpiece 0.999, 0.983; 0.344. bpe 0.987, 0.973; 0.809.
# unigram 0.583, 0.986; 0.173 (pieces never cross a morpheme: of these texts' few
# morphemes, 156 pieces in all where 500 were asked).
RECALL_GAIN = {"wordpiece": 0.5, "bpe": 0.1, "unigram": 0.5}
PRECISION = {"wordpiece": 0.95, "bpe": 0.95, "unigram": 0.5}


@pytest.mark.parametrize("kind", sorted(RECALL_GAIN))
def test_pieces_follow_morphemes_and_read_raw_text(kind: str) -> None:
    train, held = korean(3000, seed=1), korean(300, seed=2)
    plain = train_tokenizer(train, VocabConfig(kind=kind, vocab_size=500))
    config = VocabConfig(kind=kind, vocab_size=500, pre_tokenize="morphemes")
    tok = train_tokenizer(train, config)
    spec = json.loads(tok.to_str())
    assert MARK not in tok.to_str()
    # The kind's own pre-tokenizer: raw text in, no analyzer needed.
    standard = json.loads(untrained_tokenizer(config).to_str())["pre_tokenizer"]
    assert spec["pre_tokenizer"] == standard
    precision, recall, cuts = _agreement(tok, held)
    _, recall_plain, _ = _agreement(plain, held)
    assert cuts > 1000 and precision > PRECISION[kind], (precision, cuts)
    assert recall > 0.95 and recall > recall_plain + RECALL_GAIN[kind], (recall, recall_plain)
    if kind in ("wordpiece", "unigram"):
        # Renamed marked pieces that were also learned as continuations are one piece,
        # Unigram's are taken apart: trained again on more, the vocabulary has the size
        # asked for, not more.
        for size in (150, 200) if kind == "wordpiece" else (100, 120):
            small = train_tokenizer(
                train, VocabConfig(kind=kind, vocab_size=size, pre_tokenize="morphemes")
            )
            assert small.get_vocab_size(with_added_tokens=False) == size, kind
    if kind == "unigram":
        assert "습니다" in tok.get_vocab()
        assert tok.encode("학교에서 먹었습니다").tokens[1:3] == ["▁학교", "에서"]
    if kind == "wordpiece":
        vocab = tok.get_vocab()
        assert "##습니다" in vocab or "##니다" in vocab
        assert tok.encode("학교에서 먹었습니다").tokens[1] == "학교"


def test_the_export_reads_raw_text_in_transformers(tmp_path) -> None:
    transformers = pytest.importorskip("transformers")
    from clozeworks.corpus.vocab.train import save_tokenizer

    config = VocabConfig(kind="wordpiece", vocab_size=400, pre_tokenize="morphemes")
    tok = train_tokenizer(korean(1500, seed=3), config)
    save_tokenizer(tok, config, tmp_path / "tok")
    hf = transformers.PreTrainedTokenizerFast.from_pretrained(str(tmp_path / "tok"))
    text = "선생님께서 도서관에서 책을 읽었습니다."
    assert hf(text)["input_ids"] == tok.encode(text).ids


def test_cloze_vocab_marks_the_sample_on_the_workers(tmp_path) -> None:
    write_jsonl(tmp_path / "raw" / "a.jsonl", [{"text": t} for t in korean(1500, seed=4)])
    assert main(["clean", "--input", str(tmp_path / "raw"), "--output", str(tmp_path / "docs"),
                 "--no-progress"]) == 0  # fmt: skip
    out = tmp_path / "tok"
    argv = ["vocab", "--input", str(tmp_path / "docs"), "--output", str(out), "--no-progress"]
    assert main([*argv, "--vocab-size", "200", "--pre-tokenize", "morphemes"]) == 0
    stats = json.loads((out / "vocab_stats.json").read_text())
    assert stats["pre_tokenize"] == "morphemes:mecab" and stats["vocab_size"] == 200
    text = (out / "tokenizer.json").read_text()
    assert MARK not in text
    assert "##습니다" in Tokenizer.from_str(text).get_vocab() or "##니다" in text
    assert not list(tmp_path.glob("tok/.staging-*"))
    assert pq.read_table(tmp_path / "docs").num_rows == 1500


def test_without_the_analyzer_the_extra_is_named(tmp_path) -> None:
    hide = (
        "import sys\n"
        "sys.modules['mecab'] = None\n"
        "from clozeworks.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", hide, "vocab", "--input", str(tmp_path), "--output",
         str(tmp_path / "tok"), "--pre-tokenize", "morphemes"],
        cwd=ROOT, capture_output=True, text=True, env={"PYTHONPATH": python_path()},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "pip install 'clozeworks[mecab]'" in done.stderr
