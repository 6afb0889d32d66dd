"""Error types shared by every layer.

The command line turns a `ClozeError` into one line on stderr and its `exit_code`;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import re
from collections.abc import Callable


class ClozeError(Exception):
    """A failure the user can act on. `str(err)` is the whole message."""

    exit_code = 1


class BadInputError(ClozeError):
    """Input that cannot be used: the message names the file or record and the problem."""

    exit_code = 2


class UsageError(ClozeError):
    """A command line that asks for something impossible or unavailable."""

    exit_code = 2


class SchemaError(BadInputError):
    """A saved record (manifest, config, stats) that does not match its schema."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        super().__init__(f"{source}: field '{field}': {problem}")


class WriteError(ClozeError):
    """A file that could not be written (a full disk, a quota, permissions): the message
    names it. Exit 1: nothing the command line said was wrong."""

    def __init__(self, path: str, err: Exception) -> None:
        self.path = path
        said = getattr(err, "strerror", None) or str(err).splitlines()[0]
        super().__init__(f"{path}: cannot write: {said}")


class StoreError(ClozeError):
    """An object store's refusal that its client's retries did not fix (a bucket that does
    not exist, a 5xx that persists): the message names the URL and what to do. Exit 1."""


class SettingError(UsageError):
    """A setting whose value no run can use. `setting` is its name as a config field
    (`max_seq_len`); the command line says it as its flag (`--max-seq-len`). `problem` may
    name other settings as `{name}`, said the same way."""

    def __init__(self, setting: str, problem: str) -> None:
        self.setting = setting
        self.problem = problem
        super().__init__(self.said(lambda name: name))

    def said(self, name_of: Callable[[str], str]) -> str:
        """The message with every setting named by `name_of` (a field name -> its flag)."""
        return f"{name_of(self.setting)} {_SETTING.sub(lambda m: name_of(m[1]), self.problem)}"


_SETTING = re.compile(r"\{(\w+)\}")


class DryRun(Exception):
    """A pipeline was translated into its runner's job and not run (`--dry_run True` with
    the DataflowRunner): nothing was read past the listing, nothing written. The command
    ends there with exit 0; `job_file` is where the job was written, if anywhere."""

    def __init__(self, runner: str, steps: int, job_file: str | None) -> None:
        where = f"; the job is in {job_file}" if job_file else ""
        super().__init__(f"dry run: {runner} job of {steps} steps translated, not run{where}")
        self.job_file = job_file


def signal_exit_code(name: str) -> int:
    """The exit code of a command that a signal (`SIGINT`, `SIGTERM`) stopped before its
    work was done: 128 + the signal's number, as a shell reports a process the signal
    ended (130 for Ctrl-C, 143 for SIGTERM). One rule for every verb: a stage interrupted
    mid-run and a training run that stopped at a committed checkpoint alike, so that
    `cloze train ... && cloze export ...` never exports a run that did not finish."""
    import signal

    return 128 + int(signal.Signals[name])
