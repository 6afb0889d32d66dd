"""Sub-character Hangul (`--hangul jamo`, KR-BERT): the shipped table is SentencePiece's
build of Unicode's decompositions; the normalizer decomposes every syllable and changes no
other character; the decoder composes exactly as NFC does; every kind trains on jamo and
gives the text back; transformers reads the directory; `cloze vocab` writes it."""

from __future__ import annotations

import json
import random
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import decoders, normalizers

from clozeworks.cli import main
from clozeworks.corpus.vocab import jamo
from clozeworks.corpus.vocab.train import VocabConfig, save_tokenizer, train_tokenizer
from clozeworks.schemas.errors import SettingError
from tests.conftest import write_jsonl
from tests.corpus.vocab.test_morphemes import korean

DECOMPOSE = normalizers.Sequence(jamo.decomposing())
COMPOSE = decoders.Sequence(jamo.composing())
SYLLABLES = jamo.syllables()
# Modern conjoining jamo: leading consonants, vowels, trailing consonants.
LEADING = [chr(c) for c in range(0x1100, 0x1113)]
VOWELS = [chr(c) for c in range(0x1161, 0x1176)]
TRAILING = [chr(c) for c in range(0x11A8, 0x11C3)]
TEXTS = korean(1500, seed=11) + ["Café au lait, naïve résumé: 12 ½ € ①."] * 40
SAMPLE = "선생님도 도서관에서 책만 읽었습니다. 값싼 닭볶음탕, 뷁! Café ①"
KINDS = {
    "wordpiece": {"kind": "wordpiece"},
    "wordpiece-cased": {"kind": "wordpiece", "cased": True},
    "bpe": {"kind": "bpe"},
    "bpe-char": {"kind": "bpe", "bpe_level": "char"},
    "unigram": {"kind": "unigram"},
}


def test_the_table_is_sentencepieces_build_of_the_decompositions() -> None:
    pytest.importorskip("sentencepiece")
    assert jamo.build_charsmap() == jamo.charsmap()


def test_every_syllable_is_decomposed() -> None:
    text = " ".join(SYLLABLES)
    assert DECOMPOSE.normalize_str(text) == unicodedata.normalize("NFD", text)
    joined = "".join(SYLLABLES)  # no spaces: each syllable is its own grapheme still
    assert DECOMPOSE.normalize_str(joined) == unicodedata.normalize("NFD", joined)


def test_no_other_character_changes() -> None:
    others = [
        chr(c)
        for c in range(0x110000)
        if not (0xD800 <= c <= 0xDFFF or jamo.FIRST_SYLLABLE <= c <= jamo.LAST_SYLLABLE)
    ]
    for start in range(0, len(others), 50_000):
        chunk = others[start : start + 50_000]
        assert DECOMPOSE.normalize_str("".join(chunk)) == "".join(chunk)
        spaced = " ".join(chunk)
        assert DECOMPOSE.normalize_str(spaced) == spaced


def test_a_mark_after_a_syllable_is_kept() -> None:
    """SentencePiece's map takes a grapheme under six bytes as one key: without the
    sentinel, 가 + U+0301 would lose its mark."""
    marks = [c for c in map(chr, range(0x300, 0x800)) if unicodedata.category(c).startswith("M")]
    rng = random.Random(3)
    for mark in marks:
        syllable = rng.choice(SYLLABLES)
        text = f"{syllable}{mark}{syllable}{mark}{mark} a{mark}"
        want = unicodedata.normalize("NFD", syllable)
        assert DECOMPOSE.normalize_str(text) == f"{want}{mark}{want}{mark}{mark} a{mark}"
    # The sentinel is a noncharacter; where text holds it elsewhere, it stays.
    assert DECOMPOSE.normalize_str("\uffff가\uffff") == "\uffff\u1100\u1161\uffff"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([*LEADING, *VOWELS, *TRAILING, "q", " ", "\u0301"]), max_size=40))
def test_the_decoder_composes_as_nfc(chars: list[str]) -> None:
    """Pieces hold no syllables (the normalizer took them apart): over jamo in any order,
    a letter and a mark NFC never composes (there is no precomposed q with an acute), the
    decoder's composition is NFC's, piece boundaries anywhere."""
    text = "".join(chars)
    cut = random.Random(len(text)).sample(range(1, len(text)), k=min(5, max(len(text) - 1, 0)))
    pieces = [text[i:j] for i, j in zip([0, *sorted(cut)], [*sorted(cut), len(text)], strict=True)]
    assert COMPOSE.decode(pieces) == unicodedata.normalize("NFC", text)


@pytest.fixture(scope="module", params=list(KINDS))
def trained(request):
    config = VocabConfig(vocab_size=400, hangul="jamo", **KINDS[request.param])
    return request.param, config, train_tokenizer(TEXTS, config)


def test_every_kind_learns_jamo_and_gives_syllables_back(trained) -> None:
    kind, config, tok = trained
    byte_level = decoders.ByteLevel()
    vocab = list(tok.get_vocab())
    pieces = "".join(byte_level.decode([t]) for t in vocab) if kind == "bpe" else "".join(vocab)
    assert not any(c in pieces for c in SYLLABLES)  # learned over jamo only
    assert any(c in pieces for c in TRAILING)
    text = " ".join(korean(3, seed=12))  # words of the training text: no [UNK]
    enc = tok.encode(text)
    back = tok.decode(enc.ids, skip_special_tokens=True)
    assert back == (text.lower() if config.lowercase else text)
    # Offsets point into the text as written: a piece spans the syllables it is part of.
    for token, (start, end) in zip(enc.tokens, enc.offsets, strict=True):
        piece = token.removeprefix("##").removeprefix("\u2581")
        if kind != "bpe" and piece and end > start:
            assert piece in unicodedata.normalize("NFD", text[start:end]), (token, start, end)
    covered = {i for s, e in enc.offsets for i in range(s, e)}
    assert all(i in covered for i, c in enumerate(text) if "가" <= c <= "힣")


def test_the_default_is_whole_syllables() -> None:
    assert VocabConfig().hangul == "syllables"
    tok = train_tokenizer(TEXTS, VocabConfig(vocab_size=400))
    assert "Precompiled" not in tok.to_str()
    assert any(c in "".join(tok.get_vocab()) for c in SYLLABLES)
    with pytest.raises(SettingError):
        VocabConfig(hangul="letters")  # type: ignore[arg-type]


def test_transformers_reads_it(trained, tmp_path) -> None:
    transformers = pytest.importorskip("transformers")
    _, config, tok = trained
    save_tokenizer(tok, config, tmp_path / "tok")
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    ids = hf(SAMPLE)["input_ids"]
    assert ids == tok.encode(SAMPLE).ids
    assert hf.decode(ids, skip_special_tokens=True) == tok.decode(ids, skip_special_tokens=True)


def test_cloze_vocab_writes_it(tmp_path) -> None:
    write_jsonl(tmp_path / "raw" / "a.jsonl", [{"text": t} for t in TEXTS])
    docs, out = tmp_path / "docs", tmp_path / "tok"
    assert (
        main(["clean", "--input", str(tmp_path / "raw"), "--output", str(docs), "--no-progress"])
        == 0
    )
    argv = ["vocab", "--input", str(docs), "--output", str(out), "--no-progress"]
    assert main([*argv, "--vocab-size", "400", "--hangul", "jamo"]) == 0
    stats = json.loads((out / "vocab_stats.json").read_text())
    assert stats["hangul"] == "jamo"
    assert stats["heldout"]["unk_rate"] == 0
    spec = json.loads((out / "tokenizer.json").read_text())
    assert "Precompiled" in json.dumps(spec["normalizer"])
