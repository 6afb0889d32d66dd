"""The local runner, and pipelines that leave no temporary directory behind.

Beam's `DirectRunner` (2.77) first tries Prism: it downloads a Go binary from GitHub at
run time, leaves a `beam-temp*` directory in the system temp on every run, and where the
download works the pipeline runs on Prism, a runner we do not test. Offline it falls back,
after the attempt, to the FnApiRunner. `LocalRunner` is that fallback without the attempt:
the same runner, the same provision info (so workers see the pipeline options), with
`--direct_num_workers` / `--direct_running_mode` as the DirectRunner reads them. Prism is
still there for whoever names it (`--runner PrismRunner`).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability.api import beam_provision_api_pb2
from apache_beam.runners.runner import PipelineRunner

LOCAL_RUNNER = f"{__name__}.LocalRunner"
# What users and Beam call the direct runner: each of these gets LocalRunner.
DIRECT_NAMES = ("directrunner", "direct", "switchingdirectrunner")


class LocalRunner(PipelineRunner):
    """Beam's FnApiRunner, as the DirectRunner runs it once it has given up on Prism."""

    def run_pipeline(self, pipeline: beam.Pipeline, options: PipelineOptions) -> Any:
        from apache_beam.runners.portability.fn_api_runner import fn_runner
        from apache_beam.runners.portability.portable_runner import JobServiceHandle

        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        info = beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)
        provision = fn_runner.ExtendedProvisionInfo(info)
        return fn_runner.FnApiRunner(provision_info=provision).run_pipeline(pipeline, options)


@contextlib.contextmanager
def run_pipeline(options: PipelineOptions) -> Iterator[beam.Pipeline]:
    """`with beam.Pipeline(options=options) as p`, which also removes the temporary
    directory Beam makes for every pipeline when building or running it fails (Beam
    removes it only after a run)."""
    p = beam.Pipeline(options=options)
    try:
        with p:
            yield p
    finally:
        shutil.rmtree(p.local_tempdir, ignore_errors=True)
