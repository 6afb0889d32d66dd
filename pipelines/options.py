"""Runner options: our flags are parsed by the command; everything else goes to Beam."""

from __future__ import annotations

from collections.abc import Sequence

from apache_beam.options.pipeline_options import (
    PipelineOptions,
    SetupOptions,
    StandardOptions,
)


def pipeline_options(beam_argv: Sequence[str]) -> PipelineOptions:
    """PipelineOptions from the flags the command did not know.

    The runner defaults to DirectRunner (Prism, Beam's newer default, fetches a binary at
    run time). On any remote runner the workers need this package, so `save_main_session`
    stays off and the caller's `--setup_file` / `--sdk_container_image` are passed through.
    """
    options = PipelineOptions(list(beam_argv))
    standard = options.view_as(StandardOptions)
    if not standard.runner:
        standard.runner = "DirectRunner"
    options.view_as(SetupOptions).save_main_session = False
    return options


def is_local(options: PipelineOptions) -> bool:
    runner = options.view_as(StandardOptions).runner or "DirectRunner"
    return runner in ("DirectRunner", "direct", "BundleBasedDirectRunner", "SwitchingDirectRunner")
