"""The fastest exact encoder (issue 39, item 1): whatever fast.py chooses gives every id
`tokenizers` gives, for every vocabulary kind, on real documents in nine scripts and on
edge cases; the shard encoder's batches are the same either way."""

from __future__ import annotations

import numpy as np
import pytest

from clozeworks.corpus.shards.tokenize import DocumentEncoder
from clozeworks.corpus.vocab import fast
from clozeworks.corpus.vocab.train import VocabConfig, train_tokenizer
from tests.corpus.text import real_documents

DOCUMENTS = [text for _, _, text in real_documents.documents()]
EDGES = [
    "Deploy 🚀 done ✅ 👩‍💻 🏳️‍🌈 🇰🇷🇯🇵 👍🏽 " * 50,
    "tab\there\x00nul\x07bell\x1b[31mred\r\nCRLF\x0bVT\x0cFF\u200bZWSP\ufeffBOM " * 50,
    ("a_very_long_identifier_without_spaces" * 30 + " ") * 900,  # a 1 MB line
    "The [CLS] token and [SEP], <s> and </s> and <mask> written as text. " * 20,
    "",
    "DEL\x7fin a word, ÉCOLE [MASK] été, <extra_id_3> Ｆｕｌｌ ｗｉｄｔｈ",
]
KINDS = {
    "wordpiece": {"kind": "wordpiece"},
    "wordpiece-cased": {"kind": "wordpiece", "cased": True},
    "bpe": {"kind": "bpe"},
    "unigram": {"kind": "unigram"},
    "unigram-t5": {"kind": "unigram", "sentinels": 100},
    "wordpiece-jamo": {"kind": "wordpiece", "hangul": "jamo"},
    "bpe-jamo": {"kind": "bpe", "hangul": "jamo"},
}
# What bench/tokenize/compare.py found, for the candidates installed with the dev extra:
# tokie reads BPE whole; its normalizers differ from `tokenizers`' (it keeps DEL, it does
# not lowercase after a Replace), so the others are split.
EXPECTED = {
    "wordpiece": "tokie+split",
    "wordpiece-cased": "tokie+split",
    "bpe": "tokie",
    "unigram": "tokie+split",
    "unigram-t5": "tokie+split",
    "wordpiece-jamo": "tokie+split",
    "bpe-jamo": "tokie+split",
}


@pytest.fixture(scope="module", params=list(KINDS))
def tokenizer(request):
    config = VocabConfig(vocab_size=3000, **KINDS[request.param])
    return request.param, train_tokenizer(DOCUMENTS, config)


def test_the_chosen_encoder_gives_every_id(tokenizer) -> None:
    kind, tok = tokenizer
    name, encode = fast.fast_encoder(tok)
    if fast.importlib.util.find_spec("tokie") is not None:
        assert name == EXPECTED.get(kind, "tokenizers")
    for texts in (DOCUMENTS, EDGES):
        got_ids, got_lengths = encode(texts)
        want = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
        assert got_lengths.tolist() == [len(ids) for ids in want]
        assert got_ids.tolist() == [i for ids in want for i in ids]


def test_the_shard_encoder_batches_are_the_same_either_way(tokenizer, monkeypatch) -> None:
    _, tok = tokenizer
    chosen = DocumentEncoder(tok, "en")
    monkeypatch.setenv(fast.ENCODER_VARIABLE, "tokenizers")
    reference = DocumentEncoder(tok, "en")
    assert reference.encoder == "tokenizers"
    texts = DOCUMENTS + EDGES
    for split in (True, False):
        a, b = chosen.encode(texts, split), reference.encode(texts, split)
        for x, y in ((a.ids, b.ids), (a.sentences, b.sentences), (a.documents, b.documents)):
            assert np.array_equal(x, y)


def test_the_steps_dropped_for_plain_text_leave_it_as_it_is() -> None:
    from tokenizers import normalizers

    plain = fast.PLAIN_PROBES[0] + fast.PROBES[0]
    for name in fast.ASCII_IDENTITY:
        assert getattr(normalizers, name)().normalize_str(plain) == plain, name
    bert = {"type": "BertNormalizer", "lowercase": True}
    replace = {"type": "Replace", "pattern": {"Regex": "x"}, "content": ""}
    steps = [bert, {"type": "NFD"}, replace, {"type": "NFC"}]
    sequence = {"type": "Sequence", "normalizers": steps}
    assert fast._without(sequence, fast.ASCII_IDENTITY) == {
        **sequence,
        "normalizers": [bert, replace],
    }
    assert fast._without({**sequence, "normalizers": steps[:2]}, fast.ASCII_IDENTITY) == bert
    assert fast._without({"type": "NFKC"}, fast.ASCII_IDENTITY) is None
    assert fast._without(None, fast.ASCII_IDENTITY) is None


def test_texts_with_control_characters_are_told_apart() -> None:
    assert fast.has_no_controls("tab\tline\nCR\r 가나 \u00a0 😀 x")
    for control in ("\x0b", "\x7f", "\x85", "\u00ad", "\u200b", "\u2028", "\U000e0041"):
        assert not fast.has_no_controls(f"a {control} b"), hex(ord(control))
    assert fast.is_plain("tab\tline\n") and not fast.is_plain("é") and not fast.is_plain("\x7f")


def test_routes_say_what_each_route_says() -> None:
    texts = [t for d in DOCUMENTS for t in d.splitlines()] + EDGES + ["a\x7fb", "\x0b", "", "é"]
    for route in (fast.is_plain, fast.has_no_controls):
        for batch in (texts, [t for t in texts if t.isascii() and fast.is_plain(t)]):
            assert fast.routes(batch, route).tolist() == list(map(route, batch)), route
    assert fast.routes([], fast.is_plain).tolist() == []


def test_characters_are_taken_where_the_candidate_agrees_alone() -> None:
    tok = train_tokenizer(DOCUMENTS, VocabConfig(vocab_size=1500, kind="wordpiece"))
    reference = fast.tokenizers_encoder(tok)

    def wrong_on_e_acute(texts):
        out = [reference([t]) for t in texts]
        ids = [i + ("é" in t) for t, (i, _) in zip(texts, out, strict=True)]
        return np.concatenate(ids), np.concatenate([n for _, n in out])

    # marks, format characters and conjoining jamo combine with their neighbours: never
    chars = fast.agreeing_characters(wrong_on_e_acute, reference, "aé©’\u0301\u200b가ᄀ" * 40)
    assert chars == "a©’가"
    route = fast.CharacterRoute(chars)
    assert route("a © ’ 가\t\n") and not route("é") and not route("a\x7f")
    name, encode = fast.fast_encoder(tok)
    if name == "tokie+split":  # what uncased WordPiece reads through tokie whole
        taken = encode.fast.other.route.chars
        assert "©" in taken and "’" in taken and "≠" not in taken  # tokie strips its overlay


def test_plain_and_other_texts_come_back_in_order() -> None:
    def tagged(tag):
        def encode(texts):
            lengths = np.array([len(t) for t in texts], dtype=np.int64)
            return np.full(int(lengths.sum()), tag, dtype=np.int32), lengths

        return encode

    texts = ["ab", "é", "", "cde", "ü\x7f", "f"]
    ids, lengths = fast.SplitEncoder(tagged(1), tagged(2))(texts)
    assert lengths.tolist() == [2, 1, 0, 3, 2, 1]
    assert ids.tolist() == [1, 1, 2, 1, 1, 1, 2, 2, 1]


def _off_by_one(spec: str) -> fast.FlatEncode:
    """A candidate that reads every tokenizer.json and gives other ids."""
    from tokenizers import Tokenizer

    encode = fast.tokenizers_encoder(Tokenizer.from_str(spec))

    def wrong(texts):
        ids, lengths = encode(texts)
        return ids + 1, lengths

    return wrong


def test_a_file_no_candidate_reads_is_said_once_and_differing_ids_not_at_all(
    capsys, monkeypatch
) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    if not any(fast.importlib.util.find_spec(n) for n in fast.CANDIDATES):
        pytest.skip("no candidate installed")
    word_level = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    word_level.pre_tokenizer = pre_tokenizers.Whitespace()
    for _ in range(3):
        assert fast.fast_encoder(word_level)[0] == "tokenizers"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot read it; encoding with tokenizers" in err[0], err
    # Read whole and split, the candidate's ids differ: not taken, and nothing to say.
    monkeypatch.setattr(fast, "CANDIDATES", {"tokenizers": _off_by_one})
    for kind in ("wordpiece", "bpe"):
        tok = train_tokenizer(DOCUMENTS, VocabConfig(vocab_size=1500, **KINDS[kind]))
        assert fast.fast_encoder(tok)[0] == "tokenizers"
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("kind", ["bpe", "wordpiece-cased", "wordpiece", "unigram"])
def test_shards_are_byte_identical_with_the_fast_encoder(kind, small_build, tmp_path, monkeypatch):
    """`cloze shard` with the chosen encoder writes the bytes `tokenizers` alone writes."""
    from clozeworks.corpus.shards.recipes import ENCODER_COUNTER
    from clozeworks.corpus.vocab.train import save_tokenizer
    from clozeworks.pipelines.shard import ShardConfig, run_shard
    from clozeworks.schemas.manifest import read_manifest

    paths, _ = small_build
    config = VocabConfig(vocab_size=2000, **KINDS[kind])
    save_tokenizer(train_tokenizer(DOCUMENTS, config), config, tmp_path / "tok")
    sums, encoded_by = [], {}
    for encoder in ("chosen", "tokenizers"):
        if encoder == "tokenizers":
            monkeypatch.setenv(fast.ENCODER_VARIABLE, "tokenizers")
        out = tmp_path / encoder
        settings = {"mode": "nsp", "max_seq_len": 64, "sequences_per_shard": 400}
        run_shard(ShardConfig(input=paths.docs, tokenizer=str(tmp_path / "tok"), output=str(out),
                              **settings))  # fmt: skip
        manifest = read_manifest(out)
        sums.append([s.sha256 for s in manifest.shards])
        encoded_by[encoder] = {
            k.removeprefix(ENCODER_COUNTER): v
            for k, v in manifest.stats.items()
            if k.startswith(ENCODER_COUNTER)
        }
    assert sums[0] == sums[1] and sums[0]
    # The manifest says which encoder made the ids, with versions, in sentences.
    tokenizers_label = fast.package_label("tokenizers")
    assert encoded_by["tokenizers"] == {tokenizers_label: sum(encoded_by["chosen"].values())}
    if fast.importlib.util.find_spec("tokie") is not None:
        tokie = fast.package_label("tokie")
        assert any(k.startswith(tokie) and v > 0 for k, v in encoded_by["chosen"].items())


def test_held_out_statistics_are_the_same_either_way(tokenizer, monkeypatch) -> None:
    from clozeworks.corpus.vocab.stats import HeldOutStats

    _, tok = tokenizer
    summaries = []
    for encoder in ("chosen", "tokenizers"):
        if encoder == "tokenizers":
            monkeypatch.setenv(fast.ENCODER_VARIABLE, "tokenizers")
        stats = HeldOutStats(vocab_size=tok.get_vocab_size(), unk_id=tok.token_to_id("[UNK]"))
        stats.add(tok, DOCUMENTS + EDGES)
        summaries.append((stats.summary(), stats.scripts, stats.token_counts()))
    assert summaries[0] == summaries[1]
