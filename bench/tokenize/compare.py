"""Exact tokenizers beside `tokenizers` (issue 39, item 1): which load this project's
tokenizer.json of each kind, which give every id `tokenizers` gives, and how fast.

    python bench/tokenize/compare.py [--megabytes 8]

Vocabularies: `cloze vocab`'s own (trained here on the same realistic documents): WordPiece
uncased (the default) and cased, byte-level BPE, Unigram, and Unigram with T5's 100
sentinels. Text: realistic documents (bench/scale/corpus.py: Python's reST docs, Debian
copyright files, man pages), Debian's translated man pages in Korean, Japanese, Chinese,
Russian and German, and edge cases written here (Arabic, emoji, control characters, one
1 MB line). Identity: every id equal to `tokenizers`' `encode_batch_fast`, without special
tokens, per document. Speed: MB/s of UTF-8 text on one core and on two (each measurement in
its own process pinned to that many cores, with RAYON_NUM_THREADS set to match), the
candidate's batch call where it has one.

"clozeworks (fast.py)" is what `cloze` encodes with: the candidate and way
corpus/vocab/fast.py chooses for the file (tokie read whole, or split behind `tokenizers`'
normalizer), timed on its flat output.

Candidates: kitoken (Rust, BSD-2), tokie (Rust), fastokens (Rust), flash-tokenizer (C++,
BERT WordPiece from a vocab.txt only). `pip install kitoken tokie fastokens
flash-tokenizer`; a candidate that is not installed or cannot load a kind says so.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.corpus import realistic_texts  # noqa: E402
from bench.scale.corpus import _roff_text  # noqa: E402

SCRIPTS = {"ko": "Hangul", "ja": "Kana/Han", "zh_CN": "Han", "ru": "Cyrillic", "de": "Latin (de)"}
KINDS = {
    "wordpiece": {"kind": "wordpiece"},
    "wordpiece-cased": {"kind": "wordpiece", "cased": True},
    "bpe": {"kind": "bpe"},
    "unigram": {"kind": "unigram"},
    "unigram-t5": {"kind": "unigram", "sentinels": 100},
}
ARABIC = (
    "تتعلم النماذج اللغوية من كميات كبيرة من النصوص، ثم تتنبأ بالكلمة التالية في الجملة. "
    "يستخدم الباحثون هذه النماذج في الترجمة والتلخيص والإجابة عن الأسئلة. "
)
EDGES = {
    "Arabic": ARABIC * 40,
    "emoji": "Deploy 🚀 done ✅, tests 🧪 green 🟢; 👩‍💻 and 🏳️‍🌈 flags 🇰🇷🇯🇵. " * 60,
    "control": "tab\there\x00nul\x07bell\x1b[31mred\x1b[0m\r\nCRLF\x0bVT\x0cFF\u200bZWSP\ufeffBOM "
    * 60,
    "1 MB line": ("a_very_long_identifier_without_spaces" * 30 + " ") * 900,
}


def man_pages(lang: str, limit: int) -> list[str]:
    out = []
    for path in sorted(Path("/usr/share/man", lang).rglob("*.gz"))[:limit]:
        try:
            out.append(_roff_text(gzip.decompress(path.read_bytes()).decode("utf-8", "replace")))
        except OSError:
            continue
    return [t for t in out if t.strip()]


def corpus(megabytes: float) -> dict[str, list[str]]:
    groups = {"English docs": realistic_texts(megabytes)}
    for lang, script in SCRIPTS.items():
        groups[script] = man_pages(lang, 200)
    for name, text in EDGES.items():
        groups[name] = [text]
    return groups


# --- candidates: tokenizer.json path -> encode(list of texts) -> list of id lists ----------


def _tokenizers(path: str) -> Callable[[list[str]], list[list[int]]]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(path)
    return lambda texts: [e.ids for e in tok.encode_batch_fast(texts, add_special_tokens=False)]


def _kitoken(path: str) -> Callable[[list[str]], list[list[int]]]:
    import kitoken

    tok = kitoken.Kitoken.from_tokenizers_file(path)
    return lambda texts: [list(ids) for ids in tok.encode_all(texts)]


def _tokie(path: str) -> Callable[[list[str]], list[list[int]]]:
    import tokie

    tok = tokie.Tokenizer.from_json(path)
    return lambda texts: [list(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)]


def _fastokens(path: str) -> Callable[[list[str]], list[list[int]]]:
    import fastokens

    tok = fastokens.Tokenizer.from_file(path)
    return lambda texts: [list(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)]


def _flash(path: str) -> Callable[[list[str]], list[list[int]]]:
    from flash_tokenizer import BertTokenizerFlash

    spec = json.loads(Path(path).read_text())
    if spec["model"]["type"] != "WordPiece":
        raise ValueError("BERT WordPiece only")
    vocab = sorted(spec["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab_file = Path(path).with_suffix(".vocab.txt")
    vocab_file.write_text("".join(f"{token}\n" for token, _ in vocab))
    lower = bool(spec["normalizer"] and "Lowercase" in json.dumps(spec["normalizer"]))
    tok = BertTokenizerFlash(str(vocab_file), do_lower_case=lower, model_max_length=10**8)

    def encode(texts: list[str]) -> list[list[int]]:
        # Its core encoder adds [CLS] and [SEP], which the others leave out here.
        return [tok.tokenizer.encode(text, "longest", 10**8)[1:-1] for text in texts]

    return encode


def _chosen(path: str) -> Callable[[list[str]], tuple]:
    """What clozeworks encodes with (corpus/vocab/fast.py): flat ids and lengths."""
    from tokenizers import Tokenizer

    from clozeworks.corpus.vocab.fast import fast_encoder

    return fast_encoder(Tokenizer.from_file(path))[1]


def _lists(got: list[list[int]] | tuple) -> list[list[int]]:
    if isinstance(got, tuple):  # flat ids and lengths
        import numpy as np

        ids, lengths = got
        return [a.tolist() for a in np.split(ids, np.cumsum(lengths)[:-1])]
    return got


CANDIDATES = {
    "tokenizers": _tokenizers,
    "clozeworks (fast.py)": _chosen,
    "kitoken": _kitoken,
    "tokie": _tokie,
    "fastokens": _fastokens,
    "flash-tokenizer": _flash,
}


def _timed(candidate: str, path: str, texts_file: str, cores: int) -> None:
    """In a child process: pin to `cores` cores, encode every text, print MB/s."""
    os.sched_setaffinity(0, set(range(cores)))
    texts = json.loads(Path(texts_file).read_text())
    encode = CANDIDATES[candidate](path)
    encode(texts[:20])  # warm up
    size = sum(len(t.encode()) for t in texts)
    start = time.perf_counter()
    encode(texts)
    print(size / 1e6 / (time.perf_counter() - start))


def speed(candidate: str, path: str, texts_file: str, cores: int) -> float | None:
    env = {**os.environ, "RAYON_NUM_THREADS": str(cores), "TOKENIZERS_PARALLELISM": "true"}
    args = [sys.executable, __file__, "--time", candidate, path, texts_file, str(cores)]
    done = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    try:
        return float(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=float, default=8.0)
    args = parser.parse_args()
    from clozeworks.corpus.vocab.train import VocabConfig, train_tokenizer

    groups = corpus(args.megabytes)
    english = groups["English docs"]
    sample = english[:400] + list(itertools.chain.from_iterable(
        groups[s][:40] for s in SCRIPTS.values()))  # fmt: skip
    print(f"load {os.getloadavg()[0]:.2f}; {len(english)} English documents, "
          f"{sum(len(t.encode()) for t in english) / 1e6:.1f} MB\n")  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="tokcompare-"))
    texts_file = work / "english.json"
    texts_file.write_text(json.dumps(english))
    identity_rows, speed_rows = [], []
    for name, settings in KINDS.items():
        tok = train_tokenizer(sample, VocabConfig(vocab_size=16000, **settings))
        path = work / f"{name}.json"
        path.write_text(tok.to_str())
        reference = {g: _tokenizers(str(path))(texts) for g, texts in groups.items()}
        for candidate, load in CANDIDATES.items():
            if candidate == "tokenizers":
                continue
            try:
                encode = load(str(path))
            except Exception as err:  # any failure to load is the finding
                identity_rows.append(f"| {name} | {candidate} | cannot load: "
                                     f"{str(err).splitlines()[0][:90]} |")  # fmt: skip
                continue
            cells = []
            for group, texts in groups.items():
                try:
                    got = _lists(encode(texts))
                    same = sum(a == b for a, b in zip(got, reference[group], strict=True))
                except Exception as err:
                    same = f"error: {str(err)[:40]}"
                cells.append(f"{group} {same}/{len(texts)}")
            identity_rows.append(f"| {name} | {candidate} | {', '.join(cells)} |")
        for candidate in CANDIDATES:
            one = speed(candidate, str(path), str(texts_file), 1)
            two = speed(candidate, str(path), str(texts_file), 2)
            if one is not None:
                speed_rows.append(f"| {name} | {candidate} | {one:.2f} | "
                                  f"{'-' if two is None else f'{two:.2f}'} |")  # fmt: skip
    print("| vocabulary | candidate | documents with every id equal to tokenizers' |")
    print("|---|---|---|")
    print("\n".join(identity_rows))
    print("\n| vocabulary | candidate | MB/s, 1 core | MB/s, 2 cores |")
    print("|---|---|---|---|")
    print("\n".join(speed_rows))
    print(f"\nload {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--time"]:
        _timed(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        main()
