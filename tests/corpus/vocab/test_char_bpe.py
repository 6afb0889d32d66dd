"""Character-level BPE (SentencePiece's BPE, as KoGPT2 and KoBART): pieces of characters
with `▁` before each word, no byte symbols; the same file from every process; read by
transformers' fast tokenizer; and through `cloze vocab` and `cloze shard`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tokenizers import Tokenizer

from clozeworks.cli import main
from clozeworks.corpus.vocab.files import load_tokenizer
from clozeworks.corpus.vocab.train import VocabConfig, save_tokenizer, train_tokenizer
from clozeworks.schemas.sidecars import MANIFEST_FILE
from tests.conftest import write_jsonl
from tests.corpus.vocab.test_morphemes import korean
from tests.env import ROOT, python_path

CHAR = VocabConfig(kind="bpe", bpe_level="char", vocab_size=300)
TEXTS = korean(2000, seed=5) + ["The model reads English too, word by word."] * 50


def test_pieces_are_characters_with_word_marks() -> None:
    tok = train_tokenizer(TEXTS, CHAR)
    spec = json.loads(tok.to_str())
    assert spec["model"]["type"] == "BPE" and spec["pre_tokenizer"]["type"] == "Metaspace"
    vocab = tok.get_vocab()
    assert "학" in vocab and "▁학교" in vocab
    assert not any(t.startswith("Ġ") or "ì" in t for t in vocab)  # no byte symbols
    text = "학교에서 친구를 기다리었다."
    enc = tok.encode(text)
    assert enc.tokens[0] == "<s>" and enc.tokens[-1] == "</s>"
    assert tok.decode(enc.ids) == text
    assert "<unk>" in tok.encode("☃ 학교").tokens  # a character never seen


def test_the_same_file_from_every_process(tmp_path) -> None:
    script = (
        "import sys, hashlib\n"
        "from clozeworks.corpus.vocab.train import train_tokenizer\n"
        "from tests.corpus.vocab.test_char_bpe import CHAR, TEXTS\n"
        "print(hashlib.sha256(train_tokenizer(TEXTS, CHAR).to_str().encode()).hexdigest())\n"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONPATH": python_path(), "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in (1, 2, 3)
    }
    assert len(digests) == 1, digests


def test_transformers_reads_it(tmp_path) -> None:
    transformers = pytest.importorskip("transformers")
    tok = train_tokenizer(TEXTS, CHAR)
    save_tokenizer(tok, CHAR, tmp_path / "tok")
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    assert isinstance(hf, transformers.PreTrainedTokenizerFast)
    text = "선생님도 도서관에서 책만 읽었습니다."
    assert hf(text)["input_ids"] == tok.encode(text).ids
    assert hf.decode(hf(text)["input_ids"], skip_special_tokens=True) == text


def test_cloze_vocab_and_shard_with_it(tmp_path) -> None:
    write_jsonl(tmp_path / "raw" / "a.jsonl", [{"text": t} for t in TEXTS])
    docs, tok_dir, shards = tmp_path / "docs", tmp_path / "tok", tmp_path / "shards"
    quiet = ["--no-progress"]
    assert main(["clean", "--input", str(tmp_path / "raw"), "--output", str(docs), *quiet]) == 0
    vocab = ["vocab", "--input", str(docs), "--output", str(tok_dir), "--kind", "bpe"]
    assert main([*vocab, "--bpe-level", "char", "--vocab-size", "300", *quiet]) == 0
    info = load_tokenizer(tok_dir)
    assert info.special.word_start_prefix == "\u2581"
    assert Tokenizer.from_file(str(tok_dir / "tokenizer.json")).token_to_id("▁학교") is not None
    shard = ["shard", "--input", str(docs), "--tokenizer", str(tok_dir), "--output", str(shards)]
    assert main([*shard, "--mode", "full-sentences", "--max-seq-len", "64", *quiet]) == 0
    manifest = json.loads((shards / MANIFEST_FILE).read_text())
    assert manifest["vocab_kind"] == "bpe" and manifest["shards"]
