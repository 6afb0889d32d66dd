"""Beam counters under one namespace, and reading them back into `.stats.json`."""

from __future__ import annotations

from typing import Any

from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter

NAMESPACE = "clozeworks"
# Counters of how the work was done (shuffle files, which depend on bundling and workers),
# not of the data: visible in the runner's metrics, kept out of .stats.json so that it is
# the same however many workers ran.
RUNNER_NAMESPACE = "clozeworks.runner"


def counter(name: str) -> Any:
    return Metrics.counter(NAMESPACE, name)


def runner_counter(name: str) -> Any:
    return Metrics.counter(RUNNER_NAMESPACE, name)


def utf8_bytes(text: str) -> int:
    """`len(text.encode("utf-8"))` without encoding an ASCII text (most documents), for
    the byte counters every stage keeps per document."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def read_counters(result: Any) -> dict[str, int]:
    """Committed counter values of a finished pipeline, summed over steps, by name."""
    totals: dict[str, int] = {}
    query = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    for item in query["counters"]:
        value = item.committed if item.committed is not None else item.attempted
        totals[item.key.metric.name] = totals.get(item.key.metric.name, 0) + int(value or 0)
    return dict(sorted(totals.items()))
