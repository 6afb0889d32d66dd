"""The `cloze` command line."""

import logging


def _quiet_optional_gcp_warning(record: logging.LogRecord) -> bool:
    # Beam logs this at import time whenever the optional GCP clients are absent; it is
    # noise for anyone not running on Dataflow.
    return not str(record.msg).startswith("apitools not found")


logging.getLogger().addFilter(_quiet_optional_gcp_warning)
