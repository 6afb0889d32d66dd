"""The README's Korean corpus, end to end as written (issue 36, item 5): its commands run on a
small Korean and a Korean/English corpus made here, and the Korean documents survive."""

from __future__ import annotations

import json

import pytest

from clozeworks.cli import main
from tests.conftest import write_jsonl
from tests.corpus.text.test_languages import ENGLISH_DOC, KOREAN
from tests.readme import cloze_commands

pytest.importorskip("py3langid")


def test_the_readme_korean_corpus_runs_as_written(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    towns = ("서울", "부산", "대구", "광주", "대전", "울산")
    korean = [KOREAN.replace("서울", town) for town in towns]
    write_jsonl(tmp_path / "ko-raw" / "a.jsonl", [{"text": t} for t in korean])
    mixed = [*korean, *(ENGLISH_DOC.replace("model", f"model {i}") for i in range(6))]
    write_jsonl(tmp_path / "mixed-raw" / "a.jsonl", [{"text": t} for t in mixed])
    ran = cloze_commands("### A Korean corpus")
    assert [c[1] for c in ran] == ["clean", "clean", "vocab", "shard"]
    for argv in ran:
        # Sizes for a dozen documents; the rest as written.
        argv = [("600" if a == "32000" else a) for a in argv[1:]]
        assert main([*argv, "--no-progress"]) == 0, argv
    ko = json.loads((tmp_path / "work" / "ko" / ".stats.json").read_text())
    assert ko["documents_out"] == 6
    assert ko["languages"]["ko"]["stop_words"] is None  # no English stop words for Korean
    mixed_stats = json.loads((tmp_path / "work" / "mixed" / ".stats.json").read_text())
    assert mixed_stats["documents_out"] == 12, mixed_stats
    # The vocabulary spells Korean in syllables, not conjoining jamo, and lowercases English.
    from clozeworks.corpus.vocab.train import load_tokenizer

    tok = load_tokenizer(tmp_path / "work" / "tok").tokenizer
    pieces = tok.encode("언어 모델은 훈련됩니다 The Model", add_special_tokens=False).tokens
    assert not any("\u1100" <= ch <= "\u11ff" for piece in pieces for ch in piece), pieces
    assert "[UNK]" not in pieces and "the" in pieces, pieces
