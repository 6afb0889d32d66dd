"""Runner options: our flags are parsed by the command; everything else goes to Beam."""

from __future__ import annotations

from collections.abc import Sequence

from apache_beam.options.pipeline_options import (
    PipelineOptions,
    PortableOptions,
    SetupOptions,
    StandardOptions,
)

from clozeworks.pipelines.plumbing.beamfs import share_options
from clozeworks.pipelines.plumbing.runner import DIRECT_NAMES, LOCAL_RUNNER
from clozeworks.pipelines.plumbing.shuffle import Shuffle, buckets_for

# Below this much data a grouping waits in memory (Beam's own GroupByKey): at most a few
# hundred MB there, and writing and reading files would cost more than the grouping.
IN_MEMORY_BELOW = 16 << 20


def pipeline_options(beam_argv: Sequence[str]) -> PipelineOptions:
    """PipelineOptions from the flags the command did not know.

    The runner defaults to `LocalRunner`, which `DirectRunner` also means here: Beam's own
    DirectRunner first fetches and tries Prism at run time (`clozeworks.pipelines.plumbing.runner`).
    On any remote runner the workers need this package, so `save_main_session`
    stays off and the caller's `--setup_file` / `--sdk_container_image` are passed through.
    Beam's FileSystems get these options at once: every path the launcher lists, reads
    or writes from here on goes with the user's credentials and endpoints (S3's client
    is made from them; without them it fails with "Must provide one of client or
    options"), and so do the workers (`beamfs.FileSystemsDoFn`).
    """
    options = PipelineOptions(list(beam_argv))
    standard = options.view_as(StandardOptions)
    if not standard.runner or standard.runner.lower() in DIRECT_NAMES:
        standard.runner = LOCAL_RUNNER
    options.view_as(SetupOptions).save_main_session = False
    share_options(options)
    return options


def shuffle_for(options: PipelineOptions, directory: str, data_bytes: int) -> Shuffle:
    """How a pipeline's groupings cross: through files under `directory` where a grouping
    would wait in one process's memory (the DirectRunner, the portable runner's embedded
    job server), Beam's own shuffle where a service does it (Dataflow, Flink, Spark).
    `data_bytes` (about what will be shuffled) sizes the buckets; below IN_MEMORY_BELOW
    the grouping stays in memory. Either way the output is the same."""
    if not is_local(options) or data_bytes < IN_MEMORY_BELOW:
        return Shuffle()
    return Shuffle(directory, buckets_for(data_bytes))


def is_local(options: PipelineOptions) -> bool:
    """Whether the pipeline runs on this machine: the DirectRunner, or the portable runner
    with its embedded job server."""
    runner = options.view_as(StandardOptions).runner or "DirectRunner"
    if runner == "PortableRunner":
        return options.view_as(PortableOptions).job_endpoint == "embed"
    return runner == LOCAL_RUNNER or runner.lower() in (*DIRECT_NAMES, "bundlebaseddirectrunner")
