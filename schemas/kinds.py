"""The names a setting may take, each written once as a `Literal` type; the tuples beside
them are derived from it (`typing.get_args`) for choices, messages and validation."""

from __future__ import annotations

from typing import Literal, get_args

# Shard modes (docs/design.md, "Shard modes"): sentence pairs with a label, or sequences
# packed from documents.
PairMode = Literal["nsp", "sop", "sso"]
PackedMode = Literal["full-sentences", "doc-sentences", "single"]
ShardMode = Literal[PairMode, PackedMode]
PAIR_MODES: tuple[PairMode, ...] = get_args(PairMode)
PACKED_MODES: tuple[PackedMode, ...] = get_args(PackedMode)
SHARD_MODES: tuple[ShardMode, ...] = get_args(ShardMode)

# Where our rules and a paper's code differ, `reference` gives the paper's (pair and
# packing rules: docs/design.md, "Where we differ from the reference").
RuleSet = Literal["clozeworks", "reference"]

# Masking schemes: BERT's tokens and whole words, SpanBERT's spans, ALBERT's n-grams.
MaskKind = Literal["token", "wwm", "span", "ngram"]
MASK_KINDS: tuple[MaskKind, ...] = get_args(MaskKind)

# Pretraining objectives; the sentence ones read a pair shard's label.
SentenceObjective = Literal["nsp", "sop", "sso"]
# Learned from a teacher: kd and cos, DistilBERT's soft targets and hidden-state cosine;
# att and hid, TinyBERT's attention-score and hidden-state MSE of the mapped layers.
Objective = Literal[
    "mlm",
    SentenceObjective,
    "sbo",
    "wso",
    "kd",
    "cos",
    "att",
    "hid",
    "rtd",
    "clm",
    "t5",
    "plm",
    "bart",
]
SENTENCE_OBJECTIVES: tuple[SentenceObjective, ...] = get_args(SentenceObjective)
OBJECTIVES: tuple[Objective, ...] = get_args(Objective)

# Model families the trainer builds (trainer/families.py registers each).
FamilyName = Literal[
    "bert", "roberta", "albert", "electra", "distilbert", "gpt", "t5", "xlnet", "bart"
]
FAMILIES: tuple[FamilyName, ...] = get_args(FamilyName)

# Training precision (trainer/precision.py): auto is bf16 on a GPU and fp32 on a CPU; fp16
# scales the loss.
Precision = Literal["auto", "fp32", "bf16", "fp16"]
PRECISIONS: tuple[Precision, ...] = get_args(Precision)

# What the loader does with a damaged shard: stop, or skip it (counted, warned once).
OnError = Literal["raise", "skip"]
ON_ERROR: tuple[OnError, ...] = get_args(OnError)

# ALBERT's cross-layer parameter sharing (Lan et al. 2020, table 4): all of a layer,
# attention only, feed-forward only, or none (BERT).
Share = Literal["none", "all", "attention", "ffn"]
SHARES: tuple[Share, ...] = get_args(Share)

# The optimizers a run may use: AdamW (BERT, RoBERTa, ELECTRA) and LAMB (ALBERT).
OptimName = Literal["adamw", "lamb"]
OPTIMIZERS: tuple[OptimName, ...] = get_args(OptimName)

# Where a run trains: a GPU when there is one (auto), or the one named.
Device = Literal["auto", "cpu", "cuda"]
DEVICES: tuple[Device, ...] = get_args(Device)

# How masking's random replacements are drawn: uniformly over the vocabulary (BERT's and
# ALBERT's create_pretraining_data.py) or by corpus frequency (SpanBERT's masking.py).
Replacement = Literal["uniform", "frequency"]
REPLACEMENTS: tuple[Replacement, ...] = get_args(Replacement)

# How many positions a sequence's masking budget is (schemas/masking.py says each).
Budget = Literal["maskable", "reference", "electra"]
BUDGETS: tuple[Budget, ...] = get_args(Budget)
# BPE over bytes (GPT-2, RoBERTa: no unknown symbol) or over characters (SentencePiece's
# BPE: KoGPT2, KoBART; `▁` before each word).
BpeLevel = Literal["byte", "char"]
# Hangul as written (whole syllables) or as KR-BERT's sub-characters: each syllable
# decomposed into its conjoining jamo before the vocabulary is learned.
Hangul = Literal["syllables", "jamo"]
# Where sentences end: sentencex's rules (about 300 languages; a sentence needs its stop)
# or kss's (Korean: MeCab-ko's analysis finds sentence-final endings without a full stop).
SentenceSplitter = Literal["sentencex", "kss"]
