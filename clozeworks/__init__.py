"""clozeworks: the `cloze` command line, and the package the rooms beside this folder are
mapped into (`corpus/` is `clozeworks.corpus`, and so on: pyproject.toml's package-dir)."""

import logging
from pathlib import Path

# Run from a checkout (`python -m clozeworks` in its root, pytest), this folder is found
# before the installed package, and the rooms are its siblings, not its children: look
# for `clozeworks.corpus` and the rest beside it too. An installed package has them inside.
_HERE = Path(__file__).parent
if not (_HERE / "corpus").is_dir() and (_HERE.parent / "corpus" / "__init__.py").is_file():
    __path__.append(str(_HERE.parent))


def _quiet_optional_gcp_warning(record: logging.LogRecord) -> bool:
    # Beam logs this at import time whenever the optional GCP clients are absent; it is
    # noise for anyone not running on Dataflow.
    return not str(record.msg).startswith("apitools not found")


logging.getLogger().addFilter(_quiet_optional_gcp_warning)
