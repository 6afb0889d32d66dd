"""The skeleton every stage's driver shares, written once: plan (pure), graph, commit.

A driver makes one `StageRun` before it touches any path: it parses the runner's options
and hands them to Beam's FileSystems first, so the user's credentials and endpoints reach
every listing, read and write the launcher makes (an s3:// run needs them before the first
listing). Inside `with run:`, each output gets a staging directory (`stage`), groupings get
their files under it (`shuffle`), progress bars are drawn while pipelines run on this
machine (`progress`), and each pipeline's counters are read when it finishes
(`pipeline`). Every output is locked (`lock`, which `stage` does too) before the run
touches it, until the block ends: one run per output. If anything fails, every staging
directory is removed; on success the driver commits its outputs (`commit`, marker last)
inside the block, which removes them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import (
    DebugOptions,
    GoogleCloudOptions,
    PipelineOptions,
    SetupOptions,
    StandardOptions,
    TestOptions,
)

from clozeworks.corpus.locks import OutputLock
from clozeworks.pipelines.plumbing.beamfs import BEAM_FS
from clozeworks.pipelines.plumbing.counters import read_counters
from clozeworks.pipelines.plumbing.options import is_local, pipeline_options, shuffle_for
from clozeworks.pipelines.plumbing.progress import Bar, pipeline_progress
from clozeworks.pipelines.plumbing.runner import run_pipeline
from clozeworks.pipelines.plumbing.shuffle import Shuffle
from clozeworks.pipelines.plumbing.workers import workers_elsewhere
from clozeworks.schemas.errors import DryRun, SettingError


class StageRun:
    def __init__(
        self, beam_argv: Sequence[str] = (), progress: bool = False, verb: str = "run"
    ) -> None:
        self.verb = verb
        self.options = pipeline_options(beam_argv)
        self.local = is_local(self.options)
        # Workers elsewhere (Dataflow's, a remote cluster's, containers') cannot reach this
        # machine's disk; a job server and worker pool here, or any local runner, can.
        self.workers_elsewhere = workers_elsewhere(self.options)
        if self.workers_elsewhere:
            cloud = self.options.view_as(GoogleCloudOptions)
            for flag in ("temp_location", "staging_location"):
                self.require_shared(flag, getattr(cloud, flag))
        self.show_progress = progress and self.local
        self.counters: dict[str, int] = {}
        self._staged: list[str] = []
        self._locks: dict[str, OutputLock] = {}

    def __enter__(self) -> StageRun:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        err: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if kind is not None:
                for staging in self._staged:
                    BEAM_FS.remove_tree(staging)
        finally:
            for lock in reversed(self._locks.values()):
                lock.release()

    def require_shared(self, name: str, path: str | None) -> None:
        """SettingError if the runner's workers run elsewhere and `path` is on this machine:
        they would not find an input there, and each would write an output to its own disk,
        where it is lost."""
        local = path and FileSystems.get_scheme(path) in (None, "file")
        if self.workers_elsewhere and local:
            raise SettingError(
                name,
                f"{path} is on this machine, which {self.workers_elsewhere} cannot reach: "
                "it must be on a shared filesystem (gs://, s3://, ...)",
            )

    def require_worker_packages(self, flag: str, packages: Sequence[str], remedy: str) -> None:
        """SettingError if the workers run elsewhere and install a `--requirements_file`
        that lacks one of `packages`, which a flag's work needs there (what an image holds
        cannot be read from here)."""
        path = self.options.view_as(SetupOptions).requirements_file
        if not self.workers_elsewhere or not path:
            return
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            return  # Beam's stager names the file it cannot read
        named = {
            re.split(r"[<>=!~\[ ;@]", line.strip(), maxsplit=1)[0].lower()
            for line in lines
            if line.strip() and not line.lstrip().startswith(("#", "-"))
        }
        missing = [p for p in packages if p.lower() not in named]
        if missing:
            raise SettingError(
                flag,
                f"needs {', '.join(missing)} on the workers, which {path} does not install "
                f"({remedy})",
            )

    def require_reach(self, inputs: Sequence[str], paths: dict[str, str | None]) -> None:
        """`require_shared` for the paths the workers write or open (by flag: outputs, a
        filter's model) and the inputs they read, before anything is listed or locked."""
        for name, path in paths.items():
            self.require_shared(name, path)
        for path in inputs:
            self.require_shared("input", path)

    def lock(self, output: str) -> None:
        """Hold `output`'s lock until the run ends (OutputInUse if another run has it); an
        output the workers could not reach is refused first (`require_shared`)."""
        self.require_shared("output", output)
        if output not in self._locks:
            lock = OutputLock(BEAM_FS, output, self.verb)
            lock.acquire()
            self._locks[output] = lock

    def check_locks(self) -> None:
        """OutputInUse if an output's lock is no longer this run's (on an object store
        another run can overwrite it); called before anything is committed."""
        for lock in self._locks.values():
            lock.check()

    def commit(
        self, staging: str, output: str, pattern: str, marker: str, marker_data: Any
    ) -> list[str]:
        """`OutputFS.commit`, once the output's lock is known to be still this run's."""
        self.check_locks()
        return BEAM_FS.commit(staging, output, pattern, marker, marker_data)

    def stage(self, output: str) -> str:
        """A fresh staging directory in `output` (stale ones of killed runs removed), gone
        again if the run fails; `output` is locked first."""
        self.lock(output)
        staging = BEAM_FS.new_staging_dir(output)
        self._staged.append(staging)
        return staging

    def shuffle(self, directory: str, data_bytes: int) -> Shuffle:
        """Groupings through files under `directory` where they would wait in one process's
        memory, sized by `data_bytes` (`pipelines.plumbing.options.shuffle_for`)."""
        return shuffle_for(self.options, directory, data_bytes)

    def progress(self, bars: Sequence[Bar]) -> contextlib.AbstractContextManager[Any]:
        """Progress bars on stderr while the pipelines inside run on this machine."""
        return pipeline_progress(list(bars), self.show_progress)

    @contextlib.contextmanager
    def pipeline(self) -> Iterator[beam.Pipeline]:
        """A pipeline to build; it runs when the block ends, and its counters are then in
        `counters`."""
        with run_pipeline(self.options) as p:
            yield p
        job = getattr(p.result, "job", None)
        if job is not None and self.options.view_as(TestOptions).dry_run:
            raise self._dry_run(job)
        self.counters = read_counters(p.result)

    def _dry_run(self, job: Any) -> DryRun:
        """The translated job, written to `--dataflow_job_file` if given (Beam writes that
        file only when it submits): the job with the worker environment Beam would send
        (worker pool, machine type and count, container image, service account, every
        pipeline option), and its portable pipeline (the files staged for the workers are
        its environment's dependencies), for review before paying for it."""
        from google.protobuf import json_format

        pipeline = job.proto_pipeline
        path = self.options.view_as(DebugOptions).dataflow_job_file
        if path:
            document = {
                "job": json.loads(job.json()),
                "environment": _worker_environment(self.options, pipeline),
                "pipeline": json_format.MessageToDict(pipeline),
            }
            with BEAM_FS.create(path) as f:
                f.write(json.dumps(document, indent=1).encode())
        runner = str(self.options.view_as(StandardOptions).runner)
        return DryRun(runner, len(pipeline.components.transforms), path)


def _worker_environment(options: PipelineOptions, pipeline: Any) -> dict[str, Any]:
    """The `environment` of the Dataflow job Beam would submit for `pipeline`, made as its
    DataflowApplicationClient makes it (without staging anything: the staged pipeline's
    URL is where it would go)."""
    from apache_beam.runners.dataflow.internal import apiclient
    from google.protobuf import json_format

    cloud = options.view_as(GoogleCloudOptions)
    serialized = pipeline.SerializeToString()
    staged = f"{(cloud.staging_location or cloud.temp_location or '').rstrip('/')}/pipeline.pb"
    environment = apiclient.Environment(
        packages=[],
        options=options,
        environment_version=apiclient._FNAPI_ENVIRONMENT_MAJOR_VERSION,
        proto_pipeline_staged_url=staged,
        proto_pipeline=pipeline,
        pipeline_proto_hash=hashlib.sha256(serialized).hexdigest(),
    )
    document: dict[str, Any] = json_format.MessageToDict(environment.proto._pb)
    return document


def remove_shuffle(shuffle: Shuffle) -> None:
    """A finished pipeline's grouping files (the staging directory would take them too)."""
    if shuffle.directory is not None:
        BEAM_FS.remove_tree(shuffle.directory)
