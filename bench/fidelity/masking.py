"""SpanBERT's spans and ALBERT's n-grams: their reference loops against ours on real text.

    .venv/bin/python bench/fidelity/masking.py --tokenizer DIR [--rows 2000]

Rows are cut from Python's reST documentation (`apt-get install python3.11-doc`),
tokenized with the given tokenizer: SpanBERT's are single 512-token segments (its
no-NSP setting), ALBERT's 128-token pairs with at most 20 predictions (its
create_pretraining_data.py defaults). The references are the line-for-line
re-implementations in tests/corpus/shards/test_masking_reference.py. Prints, per
objective, the contiguous masked runs (touching spans merged, as SpanBERT's
merge_intervals does) in words: how many, their mean, the share of 4 or more and of 10 or
more words, and the masked share of maskable tokens; ours with the reference's budget
and with ours (`masking.budget`).

Runs with any clozeworks that has `mask_tokens`, so an older install (PYTHONPATH) gives
the "before" row.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from clozeworks.corpus.shards.masking import MaskTables, mask_tokens  # noqa: E402
from clozeworks.corpus.vocab.train import load_tokenizer  # noqa: E402
from clozeworks.schemas.masking import MaskingSettings  # noqa: E402
from tests.corpus.shards.reference_masking import (  # noqa: E402
    albert_reference,
    run_words,
    spanbert_reference,
)

try:
    from clozeworks.corpus.shards.counter_rng import sequence_keys
except ImportError:  # before counter_rng.py existed
    from clozeworks.corpus.shards.masking import sequence_keys  # type: ignore[attr-defined,no-redef]

SOURCES = Path("/usr/share/doc/python3.11/html/_sources")


def token_stream(info, limit: int) -> np.ndarray:
    ids: list[int] = []
    for path in sorted(SOURCES.glob("**/*.rst.txt")):
        ids += info.tokenizer.encode(path.read_text(errors="replace"), add_special_tokens=False).ids
        if len(ids) >= limit:
            break
    return np.array(ids[:limit], dtype=np.int64)


def make_rows(stream: np.ndarray, n: int, length: int, pairs: bool, cls: int, sep: int, seed=0):
    rng = np.random.default_rng(seed)
    body = length - (3 if pairs else 2)
    rows = []
    for i in range(n):
        chunk = stream[i * body : (i + 1) * body].tolist()
        if pairs:
            a = int(rng.integers(1, body))
            rows.append([cls, *chunk[:a], sep, *chunk[a:], sep])
        else:
            rows.append([cls, *chunk, sep])
    return rows


def stats(rows, masks, is_start, special) -> str:
    runs = np.array(
        [w for r, m in zip(rows, masks, strict=True) for w in run_words(r, m, is_start)],
        dtype=np.float64,
    )
    maskable = sum(int((~special[np.array(r)]).sum()) for r in rows)
    share = sum(len(m) for m in masks) / maskable
    return (
        f"{len(runs):7d} {runs.mean():6.2f} {100 * (runs >= 4).mean():6.1f}% "
        f"{100 * (runs >= 10).mean():6.1f}% {100 * share:6.2f}%"
    )


def ours(rows, tables, settings) -> list[set[int]]:
    out = []
    for lo in range(0, len(rows), 256):
        part = rows[lo : lo + 256]
        ids = torch.tensor(part)  # rows of one length
        keys = sequence_keys(7, 0, torch.arange(lo, lo + len(part)))
        r = mask_tokens(ids, torch.ones_like(ids, dtype=torch.bool), keys, tables, settings)
        out += [set(np.flatnonzero(m).tolist()) for m in r.masked.numpy()]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tokenizer", required=True, help="a `cloze vocab` output directory")
    p.add_argument("--rows", type=int, default=2000)
    args = p.parse_args()
    info = load_tokenizer(args.tokenizer)
    cls, sep = info.special_ids["cls"], info.special_ids["sep"]
    tables = MaskTables.build(
        info.vocab_size, info.all_special_ids, info.word_start_table(), info.special_ids["mask"]
    )
    is_start, special = tables.word_start.numpy(), tables.special.numpy()
    stream = token_stream(info, args.rows * 510)
    print(f"{'':34s} {'runs':>7s} {'mean':>6s} {'>=4':>7s} {'>=10':>7s} {'masked':>7s}")

    rows = make_rows(stream, args.rows, 512, False, cls, sep)
    rng = np.random.default_rng(1)
    ref = [{i + 1 for i in spanbert_reference(r[1:-1], is_start, rng)} for r in rows]
    print(f"{'SpanBERT reference (512, single)':34s} {stats(rows, ref, is_start, special)}")
    for budget in ("reference", "maskable"):
        try:
            settings = MaskingSettings(kind="span", budget=budget)  # type: ignore[call-arg]
        except TypeError:  # an install before `budget`
            settings = MaskingSettings(kind="span")
            budget = "(before)"
        got = ours(rows, tables, settings)
        print(f"{'  clozeworks, budget ' + budget:34s} {stats(rows, got, is_start, special)}")
        if budget == "(before)":
            break

    rows = make_rows(stream, args.rows * 4, 128, True, cls, sep)
    rng = np.random.default_rng(2)
    ref = [
        albert_reference(r, is_start, rng, max_predictions=20, specials=(cls, sep)) for r in rows
    ]
    print(f"{'ALBERT reference (128, pairs, 20)':34s} {stats(rows, ref, is_start, special)}")
    for budget in ("reference", "maskable"):
        try:
            settings = MaskingSettings(kind="ngram", budget=budget, max_predictions=20)  # type: ignore[call-arg]
        except TypeError:
            settings = MaskingSettings(kind="ngram", max_predictions=20)
            budget = "(before)"
        got = ours(rows, tables, settings)
        print(f"{'  clozeworks, budget ' + budget:34s} {stats(rows, got, is_start, special)}")
        if budget == "(before)":
            break


if __name__ == "__main__":
    main()
