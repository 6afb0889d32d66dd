"""How well a trained vocabulary fits text it was not trained on (`vocab_stats.json`).

Words are whitespace-separated words, the same for every vocabulary kind, so tokens per
word compares WordPiece, BPE and Unigram on equal terms. Characters count every character
of the text. Special tokens are never counted (texts are encoded without them).

`by_script` gives the same figures for the words of each writing system (corpus.vocab.
scripts): a document's words of one script are encoded together, apart from the rest, so a
vocabulary that serves English well and Korean badly says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from clozeworks.corpus.vocab.alphabet import CHARACTER_COVERAGE
from clozeworks.corpus.vocab.fast import encoder_for
from clozeworks.corpus.vocab.scripts import script_of


@dataclass
class HeldOutStats:
    """Running totals over held-out texts; `add` them in batches, then read `summary()`."""

    vocab_size: int
    unk_id: int | None
    special_ids: frozenset[int] = frozenset()
    documents: int = 0
    words: int = 0
    chars: int = 0
    tokens: int = 0
    unk_tokens: int = 0
    # script -> [words, tokens, unknown tokens]
    scripts: dict[str, list[int]] = field(default_factory=dict)
    _used: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._used = np.zeros(self.vocab_size, dtype=bool)
        self._counts = np.zeros(self.vocab_size, dtype=np.int64)

    def add(self, tok: Tokenizer, texts: list[str]) -> None:
        if not texts:
            return
        flat, lengths = encoder_for(tok)(texts)
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        for i, text in enumerate(texts):
            ids = flat[bounds[i] : bounds[i + 1]]
            self.documents += 1
            self.words += len(text.split())
            self.chars += len(text)
            self.tokens += len(ids)
            if len(ids):
                arr = ids.astype(np.int64)
                self._used[arr] = True
                self._counts += np.bincount(arr, minlength=self.vocab_size)[: self.vocab_size]
                if self.unk_id is not None:
                    self.unk_tokens += int(np.count_nonzero(arr == self.unk_id))
        self._add_by_script(tok, texts)

    def _add_by_script(self, tok: Tokenizer, texts: list[str]) -> None:
        pieces: list[tuple[str, list[str]]] = []
        for text in texts:
            by_script: dict[str, list[str]] = {}
            for word in text.split():
                script = script_of(word)
                if script is not None:
                    by_script.setdefault(script, []).append(word)
            pieces.extend(by_script.items())
        if not pieces:
            return
        flat, lengths = encoder_for(tok)([" ".join(w) for _, w in pieces])
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        for i, (script, words) in enumerate(pieces):
            ids = flat[bounds[i] : bounds[i + 1]]
            totals = self.scripts.setdefault(script, [0, 0, 0])
            totals[0] += len(words)
            totals[1] += len(ids)
            if self.unk_id is not None:
                totals[2] += int(np.count_nonzero(ids == self.unk_id))

    def token_counts(self) -> dict[str, Any]:
        """How often each id occurred in the held-out texts (`token_counts.json`): the
        corpus frequencies SpanBERT draws its random replacements from."""
        return {
            "source": "the vocabulary's held-out sample",
            "documents": self.documents,
            "tokens": self.tokens,
            "counts": self._counts.tolist(),
        }

    def summary(self) -> dict[str, Any]:
        """Totals and the rates people compare vocabularies by (None where undefined)."""
        regular = self.vocab_size - len(self.special_ids)
        used = int(self._used.sum()) - sum(1 for i in self.special_ids if self._used[i])
        return {
            "documents": self.documents,
            "words": self.words,
            "chars": self.chars,
            "tokens": self.tokens,
            "unk_tokens": self.unk_tokens,
            "unk_rate": _ratio(self.unk_tokens, self.tokens),
            "tokens_per_word": _ratio(self.tokens, self.words),
            "chars_per_token": _ratio(self.chars, self.tokens),
            "vocab_used": used,
            "vocab_used_share": _ratio(used, regular),
            "by_script": {
                script: {
                    "words": words,
                    "tokens": tokens,
                    "unk_tokens": unk,
                    "tokens_per_word": _ratio(tokens, words),
                    "unk_rate": _ratio(unk, tokens),
                }
                for script, (words, tokens, unk) in sorted(
                    self.scripts.items(), key=lambda item: (-item[1][0], item[0])
                )
            },
        }


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 6) if b else None


def heldout_stats(
    tok: Tokenizer,
    batches: Iterable[list[str]],
    unk_id: int | None,
    special_ids: Iterable[int] = (),
) -> HeldOutStats:
    """Encode every batch of held-out texts once (memory: one batch); `summary()` and
    `token_counts()` of the result are what the vocab stage writes."""
    stats = HeldOutStats(
        vocab_size=tok.get_vocab_size(with_added_tokens=True),
        unk_id=unk_id,
        special_ids=frozenset(special_ids),
    )
    for batch in batches:
        stats.add(tok, batch)
    return stats


# What the README calls a vocabulary too small or of the wrong kind, measured on the
# held-out documents.
UNK_RATE_LIMIT = 0.001
TOKENS_PER_WORD_LIMIT = 1.5


def heldout_warnings(heldout: dict[str, Any], alphabet: dict[str, Any] | None = None) -> list[str]:
    """A line per README threshold the held-out figures cross, with what to try; and one
    where WordPiece's alphabet leaves out more of the sample's characters than
    CHARACTER_COVERAGE allows, with the --limit-alphabet that would not."""
    out = []
    if alphabet and alphabet.get("left_out_share", 0) > 1 - CHARACTER_COVERAGE:
        scripts = ", ".join(f"{s} {n}" for s, n in list(alphabet["left_out_scripts"].items())[:3])
        out.append(
            f"the alphabet keeps {alphabet['kept']} of the {alphabet['seen']} characters of the "
            f"sample; those left out ({scripts}) are {alphabet['left_out_share']:.3%} of its "
            f"characters and become [UNK]: --limit-alphabet {alphabet['limit_for_coverage']} "
            f"spells {alphabet['coverage']:.2%} of them"
        )
    unk, per_word = heldout.get("unk_rate"), heldout.get("tokens_per_word")
    if isinstance(unk, float) and unk > UNK_RATE_LIMIT:
        out.append(
            f"UNK rate {unk:.3%} is above {UNK_RATE_LIMIT:.1%}: text the vocabulary cannot "
            "spell (try --kind bpe, byte-level and UNK-free, or a larger --vocab-size)"
        )
    if isinstance(per_word, float) and per_word > TOKENS_PER_WORD_LIMIT:
        out.append(
            f"{per_word:.2f} tokens per word is above {TOKENS_PER_WORD_LIMIT}: words are cut "
            "into many pieces (a larger --vocab-size, or a larger --sample-bytes)"
        )
    return out
