"""One boto3 client per process and S3 settings for Beam's S3 filesystem, not one per call.

Beam's `S3FileSystem` makes a new `S3IO` for every operation (open, exists, rename, list,
delete), and each makes a new boto3 session and client: botocore loads and parses S3's
service model again each time, about 0.2 s of CPU per operation, the most of a pipeline's
time on a store with many small objects (measured: 299 clients, 69 of a test's 125 s).
boto3's low-level clients are thread-safe and meant to be shared, so `install` has Beam's
`S3IO` take a copy of one Beam client wrapper per set of settings: the copy shares the
boto3 client and has its own download state, as a new wrapper would (Beam's wrapper keeps
the stream it reads from on the instance). The settings (and the environment boto3 reads)
are the key, so other endpoints or keys get clients of their own. Requests, retries and
bytes are Beam's own.
"""

from __future__ import annotations

import copy
import os
import sys
import threading
from typing import Any

_LOCK = threading.Lock()
_TEMPLATES: dict[tuple[Any, ...], Any] = {}
# Beam's S3 client settings (boto3_client.Client reads these from the options).
SETTINGS = (
    "s3_access_key_id",
    "s3_secret_access_key",
    "s3_session_token",
    "s3_endpoint_url",
    "s3_disable_ssl",
    "s3_region_name",
    "s3_api_version",
    "s3_verify",
)
# What boto3 reads from the environment when the options leave a setting out: a client made
# under other values must not serve these.
ENVIRONMENT = (
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
)


def _key(options: Any) -> tuple[Any, ...]:
    from apache_beam.options.pipeline_options import PipelineOptions, S3Options

    environment = tuple(os.environ.get(name) for name in ENVIRONMENT)
    if isinstance(options, PipelineOptions):
        s3 = options.view_as(S3Options)
        return (*(getattr(s3, name, None) for name in SETTINGS), *environment)
    return (*(options.get(name) for name in SETTINGS), *environment)


class SharedClient:
    """Stands for Beam's `boto3_client.Client` inside `s3io`: `SharedClient(options=...)`
    is a fresh copy of the one wrapper made for these settings."""

    original: Any = None  # Beam's Client class

    def __new__(cls, options: Any) -> Any:  # type: ignore[misc]
        key = _key(options)
        with _LOCK:
            template = _TEMPLATES.get(key)
            if template is None:
                template = _TEMPLATES[key] = cls.original(options=options)
        return copy.copy(template)


def install() -> bool:
    """Have Beam's `S3IO` share clients (once per process); False where Beam's S3 support
    is absent or not laid out as this expects, which leaves it as it is."""
    s3io = sys.modules.get("apache_beam.io.aws.s3io")
    module = getattr(s3io, "boto3_client", None)
    if module is None or module is _Module:
        return module is _Module
    original = getattr(module, "Client", None)
    if not isinstance(original, type):
        return False
    SharedClient.original = original
    _Module.Client = SharedClient
    s3io.boto3_client = _Module  # type: ignore[union-attr]
    return True


class _Module:
    """What `s3io.boto3_client` names once installed: only `Client` is used there."""

    Client: Any = None
