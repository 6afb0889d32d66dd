"""Record types, Arrow schemas, the manifest format and special-token conventions.

The contract between clozeworks' parts. Imports nothing from the rest of the project.
"""

from clozeworks.schemas.documents import DOCUMENT, DOCUMENT_FIELDS
from clozeworks.schemas.errors import BadInputError, ClozeError, SchemaError, UsageError
from clozeworks.schemas.kinds import MASK_KINDS, PAIR_MODES, SHARD_MODES
from clozeworks.schemas.manifest import (
    FORMAT_VERSION,
    Manifest,
    ShardInfo,
    read_manifest,
)
from clozeworks.schemas.masking import MaskingSettings
from clozeworks.schemas.sidecars import MANIFEST_FILE, STATS_FILE, TOKENIZER_DIR
from clozeworks.schemas.special_tokens import VOCAB_KINDS, SpecialTokens, special_tokens_for

__all__ = [
    "DOCUMENT",
    "DOCUMENT_FIELDS",
    "FORMAT_VERSION",
    "MANIFEST_FILE",
    "MASK_KINDS",
    "PAIR_MODES",
    "SHARD_MODES",
    "STATS_FILE",
    "TOKENIZER_DIR",
    "VOCAB_KINDS",
    "BadInputError",
    "ClozeError",
    "Manifest",
    "MaskingSettings",
    "SchemaError",
    "ShardInfo",
    "SpecialTokens",
    "UsageError",
    "read_manifest",
    "special_tokens_for",
]
