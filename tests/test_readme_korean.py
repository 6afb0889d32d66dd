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


@pytest.mark.slow
def test_rebuild_a_korean_encoder_runs_as_written(tmp_path, monkeypatch, capsys) -> None:
    """Every command of the README's "Rebuild a Korean encoder", on small files in the
    formats the corpora are published in; `cloze train` prints the configuration it would
    run (pretraining a base model is not a test)."""
    import bz2

    pytest.importorskip("mecab")
    pytest.importorskip("ijson")
    pytest.importorskip("mwparserfromhell")
    from tests.corpus.text.test_wiki import _page, dump
    from tests.corpus.vocab.test_morphemes import korean

    monkeypatch.chdir(tmp_path)
    sentences = korean(2400, seed=9)
    docs = [" ".join(sentences[i : i + 6]) for i in range(0, len(sentences), 6)]  # 400
    raw = tmp_path / "ko-raw"
    pages = [_page(i + 1, f"문서 {i}", "\n\n".join(docs[i : i + 2])) for i in range(0, 100, 2)]
    dump(raw / "kowiki-latest-pages-articles.xml.bz2", pages)
    namu = [
        {"namespace": "0", "title": f"나무 {i}", "text": f"== 개요 ==\n'''{d}'''[* 각주]",
         "contributors": []}
        for i, d in enumerate(docs[100:200])
    ]  # fmt: skip
    (raw / "namuwiki_20210301.json").write_text(json.dumps(namu, ensure_ascii=False), "utf-8")
    modu = {"id": "NIRW1900000001", "metadata": {}, "document": [
        {"id": f"NIRW1900000001.{i}", "metadata": {"title": "기사"},
         "paragraph": [{"form": s} for s in d.split(". ")]}
        for i, d in enumerate(docs[200:300])
    ]}  # fmt: skip
    (raw / "modu").mkdir()
    (raw / "modu" / "NIRW1900000001.json").write_text(json.dumps(modu, ensure_ascii=False))
    (raw / "cc100").mkdir()
    (raw / "cc100" / "ko.txt").write_text("\n\n".join(docs[300:]) + "\n", encoding="utf-8")
    assert bz2.decompress((raw / "kowiki-latest-pages-articles.xml.bz2").read_bytes())

    ran = cloze_commands("### Rebuild a Korean encoder")
    assert [c[1] for c in ran].count("train") == 5 and len(ran) == 20
    small = {"8002": "300", "32000": "400", "51200": "400", "12367": "300"}
    for argv in ran:
        argv = [small.get(a, a) for a in argv[1:]]
        if argv[0] == "train":
            argv.append("--print-config")
        assert main([*argv, "--no-progress"]) == 0, argv
    capsys.readouterr()
    for store, kept in (("wiki", 50), ("namu", 100), ("klue", 200)):
        stats = json.loads((tmp_path / "ko" / store / ".stats.json").read_text())
        assert stats["documents_out"] == kept, (store, stats)
    klue = json.loads((tmp_path / "ko" / "tok-klue" / "vocab_stats.json").read_text())
    assert klue["pre_tokenize"] == "morphemes:mecab"
    krbert = json.loads((tmp_path / "ko" / "tok-krbert" / "vocab_stats.json").read_text())
    assert krbert["hangul"] == "jamo" and krbert["heldout"]["unk_rate"] == 0
    for name in ("kobert", "albert", "klue", "krbert", "kogpt2"):
        assert list((tmp_path / "ko" / f"shards-{name}").glob("*.tar")), name
