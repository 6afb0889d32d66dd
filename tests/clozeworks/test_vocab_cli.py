"""`cloze vocab` through main(), and `cloze shard --tokenizer` with a tokenizer the user has."""

import hashlib
import json
import shutil

from transformers import AutoTokenizer

from clozeworks.cli import main
from clozeworks.corpus.vocab.train import load_tokenizer
from tests.conftest import write_jsonl


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def test_vocab_writes_a_loadable_directory_and_says_how_it_fits(small_build, tmp_path, capsys):
    out = tmp_path / "tok"
    argv = ["vocab", "--input", small_build[0].docs, "--output", str(out)]
    code = main([*argv, "--kind", "bpe", "--vocab-size", "600", "--seed", "3", "--no-progress"])
    assert code == 0
    said = capsys.readouterr()
    printed = said.out
    assert "trained a bpe vocabulary of 600 tokens" in printed
    assert "tokens per word" in printed and "UNK rate 0.0000%" in printed
    stats = json.loads((out / "vocab_stats.json").read_text())
    assert stats["sample"]["seed"] == 3 and stats["heldout"]["tokens"] > 0
    # 600 byte-level pieces cut words up: the README's threshold is said, not left to find.
    per_word = stats["heldout"]["tokens_per_word"]
    assert per_word > 1.5
    assert f"warning: {per_word:.2f} tokens per word is above 1.5" in said.err
    hf = AutoTokenizer.from_pretrained(str(out))
    assert (
        hf("Return a copy.")["input_ids"]
        == load_tokenizer(out).tokenizer.encode("Return a copy.").ids
    )


def test_an_all_filtered_store_is_a_clear_error(tmp_path, capsys) -> None:
    raw = write_jsonl(tmp_path / "raw" / "a.jsonl", [{"text": "short"}, {"text": "tiny"}])
    clean = ["clean", "--input", str(raw), "--output", str(tmp_path / "docs")]
    assert main([*clean, "--min-chars", "1000"]) == 0
    capsys.readouterr()
    vocab = ["vocab", "--input", str(tmp_path / "docs"), "--output", str(tmp_path / "tok")]
    assert main(vocab) == 2
    assert one_error_line(capsys) == (
        f"cloze vocab: error: {tmp_path / 'docs'}: the document store holds no documents"
    )
    assert not (tmp_path / "tok").exists()


def test_bad_vocab_flags_are_one_line_errors(small_build, tmp_path, capsys) -> None:
    base = ["vocab", "--input", small_build[0].docs, "--output", str(tmp_path / "t")]
    assert main([*base, "--sample-bytes", "lots"]) == 2
    assert "is not a size" in one_error_line(capsys)
    assert main([*base, "--vocab-size", "3"]) == 2
    assert "--vocab-size must be at least 6" in one_error_line(capsys)
    assert main([*base, "--special-tokens", "[CLS]"]) == 2
    assert "already a wordpiece special token" in one_error_line(capsys)
    assert main([*base, "--sample-docs", "0"]) == 2
    assert "--sample-docs must be positive" in one_error_line(capsys)


def test_shard_takes_a_plain_bert_vocab_txt(small_build, tmp_path) -> None:
    """A vocab.txt alone tokenizes exactly as the directory it came from: same shards."""
    paths, manifest = small_build
    vocab_txt = tmp_path / "mine" / "vocab.txt"
    vocab_txt.parent.mkdir()
    shutil.copyfile(f"{paths.tokenizer}/vocab.txt", vocab_txt)
    out = tmp_path / "shards"
    argv = ["shard", "--input", paths.docs, "--tokenizer", str(vocab_txt), "--output", str(out)]
    assert main([*argv, "--max-seq-len", "64", "--sequences-per-shard", "300"]) == 0
    again = json.loads((out / ".manifest.json").read_text())
    assert [s["sha256"] for s in again["shards"]] == [s.sha256 for s in manifest.shards]
    copied = out / ".tokenizer" / "tokenizer.json"
    assert again["tokenizer_sha256"] == hashlib.sha256(copied.read_bytes()).hexdigest()
    hf = AutoTokenizer.from_pretrained(str(out / ".tokenizer"))
    theirs = AutoTokenizer.from_pretrained(paths.tokenizer)
    text = "Return the lowest index in S where substring sub is found."
    assert hf(text)["input_ids"] == theirs(text)["input_ids"]
