"""A run whose `--output` is a bucket (`gs://`, `s3://`, any fsspec URL): it trains in a
local mirror and every committed checkpoint goes up as soon as it is made, so the run
outlives the machine (a preemptible GPU's disk goes with it).

The bucket is the run; the mirror is a cache. An object store has no rename, so a step is
committed there as locally: its files go up first and `COMMITTED` (their sizes and
sha256) last; a step without it is unfinished and ignored. Steps the run prunes locally
(`--keep`) lose their `COMMITTED` on the bucket first, then their files. The run's other
files (config.json, metrics.jsonl, resumes.json, teacher.json, the tokenizer) go up
before each checkpoint (so a committed step never lacks its config.json), after it, and at
the end of the run. `--resume` rebuilds the mirror from the bucket (those
files and the newest committed step) on any machine and goes on from there: steps the
mirror had that never reached the bucket are dropped with it.

The mirror is `$CLOZEWORKS_RUN_CACHE/<hash of the URL>` (default
`~/.cache/clozeworks/runs`). Buckets are reached through fsspec, with its environment
(credentials, `FSSPEC_S3_ENDPOINT_URL`, `STORAGE_EMULATOR_HOST`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

from clozeworks.corpus.locks import LOCK_FILE
from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.trainer.checkpoint import COMMITTED, STEP_PATTERN, committed_steps, step_dir

CACHE_ENV = "CLOZEWORKS_RUN_CACHE"
CONFIG = "config.json"
# Files of the run directory that stay on this machine (its lock).
_LOCAL_ONLY = (LOCK_FILE,)


def is_url(output: str) -> bool:
    return "://" in output


def mirror_dir(url: str) -> Path:
    root = os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "clozeworks" / "runs"
    return Path(root) / hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]


class BucketRun:
    """The bucket copy of a run and its local mirror (see the module docstring)."""

    def __init__(self, url: str, mirror: Path | None = None) -> None:
        import fsspec

        self.url = url.rstrip("/")
        try:
            self.fs, self.root = fsspec.core.url_to_fs(self.url)
        except (ImportError, ValueError) as err:
            raise BadInputError(f"{url}: cannot reach it: {err}") from None
        self.local = mirror or mirror_dir(self.url)
        self._pushed: dict[str, tuple[int, int]] = {}  # file -> (size, mtime) sent

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except (OSError, ValueError) as err:
            raise BadInputError(f"{self.url}: {what} failed: {err}") from None

    def _committed(self) -> list[int]:
        found = self._call("listing", self.fs.glob, f"{self.root}/step-*/{COMMITTED}")
        steps = []
        for path in found:
            match = STEP_PATTERN.fullmatch(path.rstrip("/").split("/")[-2])
            if match:
                steps.append(int(match[1]))
        return sorted(steps)

    def holds_run(self) -> bool:
        self.fs.invalidate_cache()
        return bool(self._call("a look", self.fs.exists, f"{self.root}/{CONFIG}"))

    def prepare(self, resume: bool, overwrite: bool) -> Path:
        """The mirror to train in: fresh for a new run (the bucket must hold none, or
        `overwrite`), rebuilt from the bucket for `resume`."""
        held = self.holds_run()
        if resume and not held:
            raise UsageError(f"--resume {self.url}: no run there (no {CONFIG})")
        if held and not resume and not overwrite:
            raise UsageError(
                f"{self.url}: holds a run; pass --resume to continue it or --overwrite to "
                "replace it"
            )
        shutil.rmtree(self.local, ignore_errors=True)
        self.local.mkdir(parents=True)
        if not resume:
            for path in self._call("listing", self.fs.find, self.root) if held else []:
                if not path.endswith(f"/{LOCK_FILE}"):  # this run's lock stays
                    self._call("removing the old run", self.fs.rm, path)
            return self.local
        self._download(None)
        self._remember_all()
        return self.local

    def fetch(self, step: int | None = None) -> Path:
        """The run into the mirror (which must be empty or absent) to read it: its files and
        committed `step` (default: the newest). BadInputError if there is no run or no such
        step."""
        if not self.holds_run():
            raise BadInputError(f"{self.url}: no run there (no {CONFIG})")
        self.local.mkdir(parents=True, exist_ok=True)
        self._download(step)
        return self.local

    def _download(self, step: int | None) -> None:
        steps = self._committed()  # a step the bucket lacks is refused before any download
        if step is not None and step not in steps:
            shown = ", ".join(map(str, steps)) or "none"
            raise BadInputError(f"{self.url}: no committed step {step} (committed: {shown})")
        for path in self._call("listing", self.fs.find, self.root):
            relative = path[len(self.root) :].lstrip("/")
            if relative.split("/")[0].startswith("step-") or relative in _LOCAL_ONLY:
                continue
            self._get(path, self.local / relative)
        if steps:
            chosen = step_dir(self.local, steps[-1] if step is None else step)
            partial = chosen.with_name(f".{chosen.name}.download")
            remote = f"{self.root}/{chosen.name}"
            for path in self._call("listing", self.fs.find, remote):
                self._get(path, partial / path[len(remote) :].lstrip("/"))
            partial.replace(chosen)  # COMMITTED came with it: the step counts once whole

    def _get(self, path: str, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        self._call(f"download of {path}", self.fs.get_file, path, str(target))

    def _put(self, source: Path, relative: str) -> None:
        self._call(
            f"upload of {relative}", self.fs.put_file, str(source), f"{self.root}/{relative}"
        )

    def _remember_all(self) -> None:
        for path in self._run_files():
            stat = path.stat()
            self._pushed[path.relative_to(self.local).as_posix()] = (stat.st_size, stat.st_mtime_ns)

    def _run_files(self) -> list[Path]:
        """The run's files outside its step directories, lock and half-written steps."""
        files = []
        for path in sorted(self.local.rglob("*")):
            top = path.relative_to(self.local).parts[0]
            if not path.is_file() or top.startswith((".", "step-")):  # the lock is a dot file
                continue
            files.append(path)
        return files

    def push_files(self) -> None:
        """The run's files that changed since they were last sent (config.json last: a run
        counts on the bucket once it is there)."""
        files = sorted(self._run_files(), key=lambda p: p.name == CONFIG)
        for path in files:
            relative = path.relative_to(self.local).as_posix()
            stat = path.stat()
            if self._pushed.get(relative) != (stat.st_size, stat.st_mtime_ns):
                self._put(path, relative)
                self._pushed[relative] = (stat.st_size, stat.st_mtime_ns)

    def push_step(self, step: Path) -> None:
        """Commit `step` on the bucket (COMMITTED last), drop the steps the mirror no
        longer holds (their COMMITTED first), then send the run's changed files. They go
        before the step too: a committed step on the bucket always has its run's
        config.json beside it, whenever the machine dies."""
        self.push_files()
        names = sorted(p.name for p in step.iterdir() if p.is_file() and p.name != COMMITTED)
        for name in [*names, COMMITTED]:
            self._put(step / name, f"{step.name}/{name}")
        kept = set(committed_steps(self.local))
        for old in self._committed():
            if old not in kept:
                remote = f"{self.root}/{step_dir(self.local, old).name}"
                self._call("pruning", self.fs.rm, f"{remote}/{COMMITTED}")
                self._call("pruning", self.fs.rm, remote, True)
        self.push_files()
