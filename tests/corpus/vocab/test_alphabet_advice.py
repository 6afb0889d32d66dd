"""WordPiece keeps the 1,000 most frequent characters; Korean uses two or three times as
many syllables. `cloze vocab` says so with the --limit-alphabet that would spell 99.99% of
the sample's characters, and taking that advice brings the Hangul UNK rate down, as the
README says."""

from __future__ import annotations

import json
import re

import numpy as np

from clozeworks.cli import main
from tests.conftest import write_jsonl

SYLLABLES = 1500


def _korean_documents(n: int, seed: int) -> list[dict[str, str]]:
    """Words of 1-3 Hangul syllables drawn by Zipf's law (s = 1) from SYLLABLES syllables
    spread over the block, as a Korean corpus uses a few thousand of its 11,172."""
    rng = np.random.default_rng(seed)
    syllables = [chr(0xAC00 + 7 * i) for i in range(SYLLABLES)]
    weights = 1 / np.arange(1, SYLLABLES + 1)
    weights /= weights.sum()
    docs = []
    for _ in range(n):
        draws = rng.choice(SYLLABLES, size=240, p=weights)
        cuts = np.cumsum(rng.integers(1, 4, size=120))
        words = ["".join(syllables[i] for i in w) for w in np.split(draws, cuts[cuts < 240])]
        docs.append({"text": " ".join(w for w in words if w) + "."})
    return docs


def _vocab(tmp_path, capsys, name: str, *flags: str) -> tuple[dict, str]:
    argv = ["vocab", "--input", str(tmp_path / "docs"), "--output", str(tmp_path / name)]
    assert main([*argv, "--vocab-size", "4000", "--no-progress", *flags]) == 0
    err = capsys.readouterr().err
    return json.loads((tmp_path / name / "vocab_stats.json").read_text()), err


def test_the_alphabet_warning_names_a_limit_that_works(tmp_path, capsys) -> None:
    write_jsonl(tmp_path / "raw" / "a.jsonl", _korean_documents(1200, seed=1))
    clean = ["clean", "--input", str(tmp_path / "raw"), "--output", str(tmp_path / "docs")]
    assert main([*clean, "--no-progress"]) == 0
    capsys.readouterr()

    stats, err = _vocab(tmp_path, capsys, "tok")
    alphabet = stats["alphabet"]
    assert alphabet["kept"] == 1000 and alphabet["seen"] > 1000
    assert alphabet["left_out_scripts"]["Hangul"] == alphabet["seen"] - 1000
    # Zipf's tail past rank 1000 of 1500 is ln(1.5) / H(1500), about 5% of the syllables.
    assert 0.03 < alphabet["left_out_share"] < 0.07
    (line,) = [line for line in err.splitlines() if "the alphabet keeps" in line]
    limit = int(re.search(r"--limit-alphabet (\d+)", line).group(1))
    assert limit == alphabet["limit_for_coverage"] and 1000 < limit <= alphabet["seen"]
    before = stats["heldout"]["by_script"]["Hangul"]["unk_rate"]
    assert before > 0.01

    stats, err = _vocab(tmp_path, capsys, "tok2", "--limit-alphabet", str(limit))
    assert "the alphabet keeps" not in err
    assert stats["alphabet"]["left_out_share"] <= 0.0001
    after = stats["heldout"]["by_script"]["Hangul"]["unk_rate"]
    assert after < 0.001 < before, (before, after)
