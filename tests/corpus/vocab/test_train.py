"""Tokenizer training and the Hugging Face directory format, with real `tokenizers` and
`transformers` (no downloads)."""

import itertools
import json
import random
import shutil
from pathlib import Path

import pytest
from transformers import AutoTokenizer, BertTokenizerFast, RobertaTokenizerFast

from clozeworks.corpus.text.demo import iter_docstrings
from clozeworks.corpus.vocab.train import (
    VocabConfig,
    canonical_unigram,
    copy_tokenizer_dir,
    load_tokenizer,
    save_tokenizer,
    train_tokenizer,
    train_tokenizer_from_files,
    word_start_table,
)
from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.schemas.special_tokens import special_tokens_for

KINDS = ["wordpiece", "bpe", "unigram"]
SENTENCES = [
    "Return the lowest index in the string where substring sub is found.",
    " Leading space, then  double  spaces\tand a tab.",
    "Café naïve résumé — “quotes” and ÀÉÎ accents.",
    "中文字符 and 日本語 mixed with English.",
    "Emoji 🤗 and symbols ∑ ≤ ≥ →.",
    "Unbelievably hyphenated-words, CamelCaseIdentifiers and snake_case_names 1234567.",
    "[MASK] and <mask> and <s> written in the text.",
]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return [d["text"] for _, d in zip(range(1500), iter_docstrings(), strict=False)]


@pytest.fixture(scope="module")
def saved(texts, tmp_path_factory) -> dict[str, Path]:
    """One trained tokenizer directory per kind."""
    root = tmp_path_factory.mktemp("tokenizers")
    out = {}
    for kind in KINDS:
        config = VocabConfig(kind=kind, vocab_size=1500)
        out[kind] = save_tokenizer(train_tokenizer(texts, config), config, root / kind)
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_autotokenizer_gives_exactly_the_rust_ids(saved, kind) -> None:
    info = load_tokenizer(saved[kind])
    hf = AutoTokenizer.from_pretrained(str(saved[kind]))
    for s in SENTENCES:
        assert hf(s)["input_ids"] == info.tokenizer.encode(s).ids, s
    for a, b in itertools.pairwise(SENTENCES):
        pair = hf(a, b)
        enc = info.tokenizer.encode(a, b)
        assert pair["input_ids"] == enc.ids
        if kind != "bpe":
            assert pair["token_type_ids"] == enc.type_ids
    for role in ("pad", "unk", "cls", "sep", "mask"):
        assert getattr(hf, f"{role}_token_id") == info.special_ids[role], role
    unpadded = [len(ids) for ids in hf(SENTENCES)["input_ids"]]
    padded = hf(SENTENCES, padding=True)["input_ids"]
    for n, ids in zip(unpadded, padded, strict=True):
        assert ids[n:] == [info.special_ids["pad"]] * (max(unpadded) - n)


def test_wordpiece_follows_bert_conventions(saved) -> None:
    hf = AutoTokenizer.from_pretrained(str(saved["wordpiece"]))
    # Uncased: the tokenizer.json's own pipeline, not BertTokenizerFast, which would put
    # BERT's NFD-and-strip-every-mark normalizer back (and break Hangul; issue 36).
    assert not isinstance(hf, BertTokenizerFast)
    assert [hf.pad_token_id, hf.unk_token_id, hf.cls_token_id, hf.sep_token_id] == [0, 1, 2, 3]
    assert hf.mask_token_id == 4
    pair = hf("first part", "second part")
    n_a = len(hf("first part")["input_ids"])  # [CLS] first part [SEP]
    assert pair["input_ids"][0] == 2 and pair["input_ids"][n_a - 1] == 3
    assert pair["input_ids"][-1] == 3
    assert pair["token_type_ids"] == [0] * n_a + [1] * (len(pair["input_ids"]) - n_a)
    # Uncased by default: lowercased, accents stripped, as BERT's uncased vocabulary.
    assert hf.tokenize("Café") == hf.tokenize("cafe")
    # vocab.txt alone gives the same tokenizer (BERT's own format).
    only = saved["wordpiece"].parent / "vocab-only"
    only.mkdir(exist_ok=True)
    shutil.copyfile(saved["wordpiece"] / "vocab.txt", only / "vocab.txt")
    plain = BertTokenizerFast.from_pretrained(str(only))
    assert all(plain(s)["input_ids"] == hf(s)["input_ids"] for s in SENTENCES)


def test_bpe_follows_roberta_conventions(saved) -> None:
    hf = AutoTokenizer.from_pretrained(str(saved["bpe"]))
    assert isinstance(hf, RobertaTokenizerFast)
    assert [hf.cls_token_id, hf.pad_token_id, hf.sep_token_id, hf.unk_token_id] == [0, 1, 2, 3]
    a, b = hf("first part")["input_ids"], hf("second part")["input_ids"]
    pair = hf("first part", "second part")
    assert pair["input_ids"] == [*a, 2, *b[1:]]  # <s> A </s></s> B </s>
    assert "token_type_ids" not in pair
    # No prefix space, as RoBERTa: the first word has no "Ġ", a later one does.
    first = hf.tokenize("Hello world")
    assert not first[0].startswith("\u0120") and hf.tokenize(" Hello world")[0][0] == "\u0120"
    spaced = AutoTokenizer.from_pretrained(str(saved["bpe"]), add_prefix_space=True)
    words = spaced(["Hello", "world"], is_split_into_words=True)["input_ids"]
    assert words == load_tokenizer(saved["bpe"]).tokenizer.encode(" Hello world").ids
    # Cased, and byte-level: nothing is unknown.
    assert hf.tokenize("Hello") != hf.tokenize("hello")
    assert hf.unk_token_id not in hf("".join(SENTENCES))["input_ids"]
    # vocab.json + merges.txt alone give the same tokenizer (GPT-2's own format).
    only = saved["bpe"].parent / "bpe-files-only"
    only.mkdir(exist_ok=True)
    for name in ("vocab.json", "merges.txt"):
        shutil.copyfile(saved["bpe"] / name, only / name)
    plain = RobertaTokenizerFast.from_pretrained(str(only))
    assert all(plain(s)["input_ids"] == hf(s)["input_ids"] for s in SENTENCES)


def test_unigram_follows_albert_conventions(saved) -> None:
    hf = AutoTokenizer.from_pretrained(str(saved["unigram"]))
    assert [hf.pad_token_id, hf.unk_token_id, hf.cls_token_id, hf.sep_token_id] == [0, 1, 2, 3]
    assert hf.tokenize("the cat")[0].startswith("\u2581")  # "▁" marks a word start
    pair = hf("first part", "second part")
    n_a = len(hf("first part")["input_ids"])
    assert pair["token_type_ids"] == [0] * n_a + [1] * (len(pair["input_ids"]) - n_a)
    assert hf.tokenize("The") == hf.tokenize("the")  # uncased, as ALBERT


@pytest.mark.parametrize("kind", KINDS)
def test_same_texts_in_any_order_give_a_byte_identical_tokenizer(texts, kind) -> None:
    # tokenizers alone fails this for WordPiece (different merges) and Unigram (scores).
    config = VocabConfig(kind=kind, vocab_size=800)
    shuffled = texts[:600]
    random.Random(1).shuffle(shuffled)
    runs = [
        train_tokenizer(texts[:600], config).to_str(),
        train_tokenizer(shuffled, config).to_str(),
        train_tokenizer(list(reversed(texts[:600])), config).to_str(),
    ]
    assert runs[0] == runs[1] == runs[2]


def test_files_and_iterator_training_agree(texts, tmp_path) -> None:
    config = VocabConfig(kind="wordpiece", vocab_size=700)
    path = tmp_path / "sample.txt"
    path.write_text("\n".join(texts[:500]) + "\n", encoding="utf-8")
    lines = path.read_text(encoding="utf-8").splitlines()
    from_files = train_tokenizer_from_files([str(path)], config)
    assert from_files.to_str() == train_tokenizer(lines, config).to_str()


def test_streamed_wordpiece_needs_its_character_counts(texts) -> None:
    with pytest.raises(ValueError, match="char_counts"):
        train_tokenizer(iter(texts[:10]), VocabConfig(kind="wordpiece", vocab_size=100))


def test_wordpiece_alphabet_limit_keeps_the_most_frequent_characters(texts) -> None:
    tok = train_tokenizer(texts[:600], VocabConfig(vocab_size=900, limit_alphabet=30))
    singles = [t for t in tok.get_vocab() if len(t) == 1]
    assert len(singles) == 30
    assert {"e", "t", "a", "o"} <= set(singles)
    # Every kept character that can continue a word has its ## piece, none other has one.
    continuations = {t[2:] for t in tok.get_vocab() if t.startswith("##") and len(t) == 3}
    assert continuations <= set(singles) and "e" in continuations and "." not in continuations
    assert not {t for t in tok.get_added_tokens_decoder().values() if str(t).startswith("##")}


def test_canonical_unigram_orders_rescores_rounds_and_drops_shadows() -> None:
    floor = -15.0
    model = {
        "type": "Unigram",
        "unk_id": 0,
        "vocab": [
            ["<unk>", 0.0],
            ["b", floor + 1e-4 + 3e-14],  # penalty slot 1
            ["xy", -3.123456789],
            ["a", floor],  # penalty slot 0
            ["c", floor + 2e-4],  # penalty slot 2
            ["zz", -3.1234567],
            ["<unk>", -9.0],  # learned from text that spells it: must not shadow the special
        ],
    }
    out = canonical_unigram(model, n_special=1)
    assert out["vocab"] == [
        ["<unk>", 0.0],
        ["xy", -3.1235],
        ["zz", -3.1235],
        ["c", -14.9998],
        ["b", -14.9999],
        ["a", -15.0],
    ]


def test_text_that_spells_special_tokens_keeps_their_ids(texts) -> None:
    spelled = [f"{t} </s>foo<s> x<mask>y <pad></s>" for t in texts[:300]]
    for kind in KINDS:
        config = VocabConfig(kind=kind, vocab_size=600)
        tok = train_tokenizer(spelled, config)
        for i, token in enumerate(config.special_tokens):
            assert tok.token_to_id(token) == i, (kind, token)
        assert tok.get_vocab_size() == len(set(tok.get_vocab()))


@pytest.mark.parametrize("kind", KINDS)
def test_word_start_table_marks_first_pieces(texts, kind) -> None:
    tok = train_tokenizer(texts[:800], VocabConfig(kind=kind, vocab_size=600))
    table = word_start_table(tok, special_tokens_for(kind))
    # Several words that split into several pieces, separated by single spaces.
    text = "unbelievably hyphenated overcomplicated misunderstandings"
    enc = tok.encode(text, add_special_tokens=False)
    starts = [table[i] for i in enc.ids]
    expected = [i == 0 or enc.word_ids[i] != enc.word_ids[i - 1] for i in range(len(enc.ids))]
    assert len(enc.ids) >= 8, "the test words should split into several pieces"
    # The first piece of a text starts a word whatever its spelling (BPE's first word has no
    # "Ġ", as in RoBERTa); the masker treats the piece after [CLS] as a start.
    assert starts[1:] == expected[1:]
    assert sum(expected) == 4


def test_bpe_words_are_whitespace_words(texts) -> None:
    tok = train_tokenizer(texts[:800], VocabConfig(kind="bpe", vocab_size=600))
    table = word_start_table(tok, special_tokens_for("bpe"))
    ids = tok.encode(" see the end. and hyphen-ated", add_special_tokens=False).ids
    words: list[list[int]] = []
    for i in ids:
        if table[i] or not words:
            words.append([])
        words[-1].append(i)
    # fairseq's whole-word convention: punctuation stays with its word.
    assert [tok.decode(w).strip() for w in words] == ["see", "the", "end.", "and", "hyphen-ated"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("empty", [[], ["", "   ", "\n\t"]])
def test_empty_input_is_a_clear_error(kind, empty) -> None:
    with pytest.raises(BadInputError, match="no text to train a vocabulary"):
        train_tokenizer(empty, VocabConfig(kind=kind, vocab_size=300))


def test_config_is_checked_and_cases_follow_the_papers() -> None:
    assert VocabConfig("wordpiece").lowercase and VocabConfig("unigram").lowercase
    assert not VocabConfig("bpe").lowercase
    assert VocabConfig("bpe", cased=False).lowercase and not VocabConfig(cased=True).lowercase
    for bad in (
        {"kind": "sentencepiece"},
        {"vocab_size": 5},
        {"min_frequency": -1},
        {"limit_alphabet": 0},
        {"extra_special_tokens": ("[CLS]",)},
        {"extra_special_tokens": ("<x>", "<x>")},
        {"extra_special_tokens": (" <x>",)},
    ):
        with pytest.raises(UsageError):
            VocabConfig(**bad)  # type: ignore[arg-type]


def test_extra_special_tokens_follow_the_five(texts, tmp_path) -> None:
    config = VocabConfig(kind="unigram", vocab_size=500, extra_special_tokens=("<sep2>", "<x>"))
    out = save_tokenizer(train_tokenizer(texts[:400], config), config, tmp_path / "tok")
    info = load_tokenizer(out)
    assert info.tokenizer.token_to_id("<sep2>") == 5 and info.tokenizer.token_to_id("<x>") == 6
    assert {5, 6} <= set(info.all_special_ids)
    hf = AutoTokenizer.from_pretrained(str(out))
    assert hf("a <x> b")["input_ids"] == info.tokenizer.encode("a <x> b").ids
    assert 6 in hf("a <x> b")["input_ids"]


@pytest.mark.parametrize("kind", KINDS)
def test_sentinels_are_the_last_ids_as_in_t5(kind, texts, tmp_path) -> None:
    config = VocabConfig(kind=kind, vocab_size=500, sentinels=3)
    out = save_tokenizer(train_tokenizer(texts[:400], config), config, tmp_path / "tok")
    info = load_tokenizer(out)
    size = info.vocab_size
    assert size == 503  # on top of the trained vocabulary, as T5's 100 on its 32,000
    ids = [info.tokenizer.token_to_id(f"<extra_id_{i}>") for i in range(3)]
    assert ids == [size - 1, size - 2, size - 3]
    assert set(ids) <= set(info.all_special_ids)
    hf = AutoTokenizer.from_pretrained(str(out))
    assert hf("a <extra_id_1> b")["input_ids"] == info.tokenizer.encode("a <extra_id_1> b").ids
    assert size - 2 in hf("a <extra_id_1> b")["input_ids"]
    with pytest.raises(UsageError, match="sentinels"):
        VocabConfig(sentinels=-1)


def test_lowercase_bpe_keeps_its_normalizer_in_transformers(texts, tmp_path) -> None:
    config = VocabConfig(kind="bpe", vocab_size=500, cased=False)
    out = save_tokenizer(train_tokenizer(texts[:400], config), config, tmp_path / "tok")
    hf = AutoTokenizer.from_pretrained(str(out))
    info = load_tokenizer(out)
    assert hf("Hello World")["input_ids"] == info.tokenizer.encode("Hello World").ids
    assert hf.tokenize("Hello") == hf.tokenize("hello")


def test_plain_bert_vocab_txt_is_accepted(tmp_path) -> None:
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "##s", "."]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    info = load_tokenizer(tmp_path / "vocab.txt")
    assert info.kind == "wordpiece"
    assert info.tokenizer.encode("The cats sat.").ids == [2, 5, 6, 8, 7, 9, 3]
    assert info.tokenizer.encode("Thé cat").ids == [2, 5, 6, 3]  # uncased: accents stripped
    # Beside a tokenizer_config.json, its do_lower_case decides.
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    assert load_tokenizer(tmp_path).tokenizer.encode("The cat").ids == [2, 1, 6, 3]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["just", "words"], "lacks \\[PAD\\]"),
        (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "", "b"], "line 7 is empty"),
        (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "a"], "line 7 repeats 'a'"),
    ],
)
def test_bad_vocab_txt_names_the_line(tmp_path, lines, message) -> None:
    (tmp_path / "vocab.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(BadInputError, match=message):
        load_tokenizer(tmp_path / "vocab.txt")


def test_not_a_tokenizer_is_a_clear_error(tmp_path) -> None:
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(BadInputError, match="not a tokenizer"):
        load_tokenizer(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInputError, match=r"no tokenizer\.json or vocab\.txt"):
        load_tokenizer(tmp_path / "empty")
    (tmp_path / "x.txt").write_bytes(b"\xff\xfe[PAD]\n")
    with pytest.raises(BadInputError, match="not UTF-8"):
        load_tokenizer(tmp_path / "x.txt")


def test_copy_of_a_vocab_txt_is_a_complete_hf_directory(tmp_path, saved) -> None:
    info = load_tokenizer(saved["wordpiece"] / "vocab.txt")
    copy_tokenizer_dir(info, tmp_path / "copy")
    again = load_tokenizer(tmp_path / "copy")
    assert again.sha256 == info.sha256  # the shard manifest's fingerprint holds
    hf = AutoTokenizer.from_pretrained(str(tmp_path / "copy"))
    assert all(hf(s)["input_ids"] == info.tokenizer.encode(s).ids for s in SENTENCES)


def test_a_foreign_directory_keeps_its_own_special_tokens(tmp_path, saved) -> None:
    """An ALBERT-style directory: Unigram, but [CLS] / [SEP] / [MASK] as its config says."""
    spec = json.loads((saved["unigram"] / "tokenizer.json").read_text())
    renames = {"<s>": "[CLS]", "</s>": "[SEP]", "<mask>": "[MASK]"}
    for entry in spec["added_tokens"]:
        entry["content"] = renames.get(entry["content"], entry["content"])
    spec["model"]["vocab"] = [[renames.get(p, p), s] for p, s in spec["model"]["vocab"]]
    spec["post_processor"] = None
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
    roles = {"cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": {"content": "[MASK]"}}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(roles))
    info = load_tokenizer(tmp_path)
    assert info.special_ids == {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
    assert info.special.word_start_prefix == "\u2581"
    copy_tokenizer_dir(info, tmp_path / "copy")
    assert load_tokenizer(tmp_path / "copy").sha256 == info.sha256
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"cls_token": "[BOS]"}))
    with pytest.raises(BadInputError, match="\\[BOS\\] \\(cls\\) is missing"):
        load_tokenizer(tmp_path)


def test_a_tokenizer_that_cannot_encode_is_refused_when_loaded(tmp_path) -> None:
    """Found by the fuzzer (tests/fuzz): a WordPiece tokenizer.json whose [UNK] is not in
    its vocabulary loaded, then failed on the first text inside a shard worker."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {t: i for i, t in enumerate(["[PAD]", "[CLS]", "[SEP]", "[MASK]", "a"])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    (tmp_path / "tokenizer.json").write_text(tok.to_str())
    with pytest.raises(BadInputError, match=r"tokenizer\.json: cannot encode text \(WordPiece"):
        load_tokenizer(tmp_path)
