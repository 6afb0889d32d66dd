"""Error types shared by every layer.

The command line turns a `ClozeError` into one line on stderr and its `exit_code`;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


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
