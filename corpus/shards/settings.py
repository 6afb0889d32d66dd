"""What a shard set is built with: every setting of `cloze shard` (and `cloze build`'s shard
stage), each defined once here with its default, its help and its reason."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from clozeworks.corpus.text.filters.languages import UNDETERMINED
from clozeworks.corpus.text.sentences import DEFAULT_LANGUAGE, KSS_EXTRA
from clozeworks.schemas.errors import SettingError, UsageError
from clozeworks.schemas.kinds import (
    PACKED_MODES,
    PAIR_MODES,
    MaskKind,
    RuleSet,
    SentenceSplitter,
    ShardMode,
)
from clozeworks.schemas.manifest import MAX_BLOCK_SIZE, MAX_SEQ_LEN
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.schemas.settings import (
    DEFAULT_SEED,
    SEEDS,
    check_at_least,
    check_between,
    check_choices,
    setting,
)
from clozeworks.schemas.stats import StoreStats

# BERT's create_pretraining_data.py: a tenth of the chunks get a shorter random target.
SHORT_SEQ_PROB = 0.1
# BERT's cap on predictions per sequence, max_predictions_per_seq 20 at length 128.
MAX_PREDICTIONS_SHARE = 0.15
# A store whose documents are this share or more of one language is sharded in it.
STORE_LANGUAGE_SHARE = 0.9


def default_max_predictions(max_seq_len: int) -> int:
    """BERT's cap on predictions per sequence: round(0.15 x length)."""
    return max(1, round(MAX_PREDICTIONS_SHARE * max_seq_len))


@dataclass(frozen=True)
class ShardSettings:
    mode: ShardMode = setting("full-sentences", "what a sequence is (docs/design.md)")
    max_seq_len: int = setting(128, "tokens per sequence, specials in")
    seed: int = setting(DEFAULT_SEED, "same seed, same shards", bounds=SEEDS)
    block_size: int = setting(512, "sequences per tar sample")
    num_shards: int | None = setting(None, "exact number of shards")
    sequences_per_shard: int | None = setting(8192, "shard size when --num-shards is not given")
    short_seq_prob: float = setting(
        SHORT_SEQ_PROB, "pair modes: share of chunks given a random, shorter target length"
    )
    # Where BERT's, ALBERT's and fairseq's own rules differ from ours, the other value
    # gives theirs (docs/design.md, "Where we differ from the reference").
    pair_rules: RuleSet = setting(
        "clozeworks",
        "pair modes: 'reference' makes every one-sentence chunk a random pair and keeps "
        "over-long sentences whole, as BERT's and ALBERT's create_pretraining_data.py do "
        "(docs/design.md, where we differ from the reference)",
    )
    packing_rules: RuleSet = setting(
        "clozeworks",
        "full-sentences, doc-sentences: 'reference' leaves out a sentence longer than a "
        "sequence, as fairseq's packing for RoBERTa does; by default it is cut into pieces",
    )
    # None: the store's language (`store_language`), resolved before the shards are built.
    language: str | None = setting(
        None,
        "ISO 639 code for sentence splitting; zh and ja: whole-word, span and n-gram masking "
        "mask their segmenter's words (default: the language the store's .stats.json gives "
        f"{STORE_LANGUAGE_SHARE:.0%} or more of its documents, else {DEFAULT_LANGUAGE})",
    )
    sentence_splitter: SentenceSplitter = setting(
        "sentencex",
        "where sentences end: sentencex (rules for ~300 languages; a sentence needs its "
        "stop) or kss (Korean: MeCab-ko's analysis finds sentence ends without full stops, "
        "as comments and chat are written; the [kss] extra; ~150 paragraphs/s)",
    )
    premask: MaskKind | None = setting(None, "write statically masked copies")
    dupe_factor: int = setting(1, "masked copies per sequence (needs --premask)")
    max_predictions: int | None = setting(
        None, "cap on masked positions per sequence (default: round(0.15 x max length))"
    )
    # Which documents each sequence holds, so a sequence can be traced to its documents'
    # ids, sources and `meta` (labels, provenance): `KEY.docs.npy` in every block and a
    # table beside the shards (corpus/shards/provenance.py). Off, the shards are as before.
    provenance: bool = setting(
        False, "record each sequence's documents, with their ids, sources and meta"
    )
    # Masked share of a pre-masked sequence; BERT's 15%, no flag.
    mask_prob: float = 0.15

    @property
    def pairs(self) -> bool:
        return self.mode in PAIR_MODES

    def validate(self) -> None:
        """SettingError for a value no shard set can be built with."""
        check_choices(self)
        if not 8 <= self.max_seq_len <= MAX_SEQ_LEN:
            raise SettingError(
                "max_seq_len", f"must be in 8..{MAX_SEQ_LEN}, got {self.max_seq_len}"
            )
        check_at_least("block_size", self.block_size, 1)
        if self.block_size > MAX_BLOCK_SIZE:
            raise SettingError(
                "block_size", f"must be at most {MAX_BLOCK_SIZE}, got {self.block_size}"
            )
        if self.num_shards is not None:
            check_at_least("num_shards", self.num_shards, 1)
        if self.sequences_per_shard is not None:
            check_at_least("sequences_per_shard", self.sequences_per_shard, 1)
        check_between("short_seq_prob", self.short_seq_prob, 0.0, 1.0)
        check_at_least("dupe_factor", self.dupe_factor, 1)
        if self.premask is None and self.dupe_factor != 1:
            raise SettingError(
                "dupe_factor", "needs {premask}: without it the trainer masks every epoch anew"
            )
        if self.max_predictions is not None:
            check_at_least("max_predictions", self.max_predictions, 1)
        if self.sentence_splitter == "kss":
            if self.language not in (None, "ko"):
                raise SettingError("sentence_splitter", "kss splits Korean (--language ko)")
            if importlib.util.find_spec("kss") is None:
                raise SettingError("sentence_splitter", f"kss is not installed: {KSS_EXTRA}")
        if self.premask is not None and importlib.util.find_spec("torch") is None:
            # Static masks are drawn by the trainer's own masking code.
            raise SettingError(
                "premask",
                "draws masks with PyTorch, which is not installed: "
                "pip install 'clozeworks[premask]'",
            )
        self.masking()

    def masking(self) -> MaskingSettings | None:
        """The static masking, None without `premask`."""
        if self.premask is None:
            return None
        try:
            return MaskingSettings(
                kind=self.premask,
                prob=self.mask_prob,
                max_predictions=self.max_predictions or default_max_predictions(self.max_seq_len),
            )
        except ValueError as err:
            raise UsageError(str(err)) from None

    @property
    def text_language(self) -> str:
        """The language sentences are split and words found in."""
        return self.language or DEFAULT_LANGUAGE

    def build_settings(self) -> dict[str, Any]:
        """What the manifest records besides its own fields: everything else that decides
        the shards' bytes, None where the mode has no use for it."""
        return {
            "sequences_per_shard": self.sequences_per_shard,
            "num_shards": self.num_shards,
            "short_seq_prob": self.short_seq_prob if self.pairs else None,
            "pair_rules": self.pair_rules if self.pairs else None,
            "packing_rules": (
                self.packing_rules if self.mode in PACKED_MODES and self.mode != "single" else None
            ),
            "sentence_splitter": self.sentence_splitter if self.mode != "single" else None,
            "language": self.text_language,
            "provenance": self.provenance,
        }


def store_language(stats: StoreStats) -> str:
    """The language `cloze clean` gave (`--language`, a declared or an identified one) to
    at least STORE_LANGUAGE_SHARE of a store's documents, from the `languages` of its
    .stats.json or of the stores it was made from; DEFAULT_LANGUAGE otherwise (a store
    with no language, `und`, or a mixed one)."""
    pending = [stats]
    while pending:
        current = pending.pop(0)
        languages = current.details.get("languages")
        if isinstance(languages, dict) and languages:
            counts = {
                code: int(v.get("documents", 0))
                for code, v in languages.items()
                if isinstance(v, dict)
            }
            total = sum(counts.values())
            code, most = max(counts.items(), key=lambda kv: kv[1], default=("", 0))
            if total and most >= STORE_LANGUAGE_SHARE * total and code != UNDETERMINED:
                return code
            return DEFAULT_LANGUAGE
        pending.extend(current.inputs)
    return DEFAULT_LANGUAGE
