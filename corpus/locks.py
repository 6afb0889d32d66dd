"""One run per output: an exclusive lock file in every directory a verb writes.

Two runs into one output used to both report success, the directory ending with one run's
marker over the other's files (each run's start removes the other's staging directory).
Every verb now holds `OUTPUT/.cloze.lock` from before it touches the output until after
its commit; the file names the run (host, PID, start time, verb), so a second run can say
whose output it is.

On local disk (and NFS) the lock is the kernel's (`flock` on the open lock file): it dies
with its process, however the process ends, so a lock left by a killed run is detected
for certain and taken over with a message. An object store has no locks: the lock is an
object holding a random token, read back after writing it and checked again before the
commit, so of two runs that raced past the first check at most one commits. A lock object
left by a run that died is taken over when it names a dead process on this host; from
another host it cannot be told from a live run, and the message says which object to
delete. A lock object that cannot be read, or does not parse, is never taken over: it may
be a live run's, so the run stops in one line naming it.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import json
import os
import socket
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import IO, Any, TypeVar, cast

from clozeworks.corpus.outputs import OutputFS
from clozeworks.schemas.errors import BadInputError, ClozeError, UsageError
from clozeworks.schemas.validate import loads

LOCK_FILE = ".cloze.lock"
T = TypeVar("T")
# How long a lock object's read or removal may take on an object store before the run
# stops saying so: a store's client may retry a failing GET for ten minutes (Beam's S3
# reader backs off 5 s doubling, 7 times). The environment may set it (seconds).
LOCK_SECONDS_VARIABLE = "CLOZEWORKS_LOCK_SECONDS"
DEFAULT_LOCK_SECONDS = 60.0


def lock_seconds() -> float:
    try:
        return max(0.1, float(os.environ.get(LOCK_SECONDS_VARIABLE, DEFAULT_LOCK_SECONDS)))
    except ValueError:
        return DEFAULT_LOCK_SECONDS


def within(seconds: float, work: Callable[[], T]) -> T:
    """`work()`'s answer, or TimeoutError once `seconds` pass without one (the work goes on
    in a daemon thread, abandoned: a store client's retries cannot be interrupted)."""
    answer: dict[str, Any] = {}

    def run() -> None:
        try:
            answer["value"] = work()
        except BaseException as err:  # handed to the caller
            answer["error"] = err

    thread = threading.Thread(target=run, daemon=True, name="cloze-lock-io")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {seconds:g} s")
    if "error" in answer:
        raise answer["error"]
    return cast(T, answer["value"])


class OutputInUse(UsageError):
    """Another run holds the output's lock."""


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as the lock file says."""

    verb: str
    host: str
    pid: int
    started: str
    token: str

    @classmethod
    def me(cls, verb: str) -> Holder:
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        return cls(verb, socket.gethostname(), os.getpid(), now, uuid.uuid4().hex)

    @classmethod
    def parse(cls, data: bytes) -> Holder | None:
        """The holder a lock file names, or None for a file that names none (empty, cut
        short, or not ours)."""
        try:
            fields = loads(data.decode("utf-8"))
            return cls(
                str(fields["verb"]),
                str(fields["host"]),
                int(fields["pid"]),
                str(fields["started"]),
                str(fields["token"]),
            )
        except (ValueError, TypeError, KeyError, RecursionError):
            return None

    def to_bytes(self) -> bytes:
        return (json.dumps(asdict(self), sort_keys=True) + "\n").encode()

    def said(self) -> str:
        return f"`cloze {self.verb}` (PID {self.pid} on {self.host}, started {self.started})"

    def is_dead_here(self) -> bool:
        """Whether this names a process on this host that no longer runs."""
        if self.host != socket.gethostname() or self.pid <= 0:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # alive, someone else's
            return False
        return False


def is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


class OutputLock:
    """`with OutputLock(fs, output, verb):` holds `output`'s lock (making `output`).

    A verb that swaps a finished directory in for `output` (export, finetune) locks
    `beside` it, `.NAME.cloze.lock` in its parent: a lock inside would go with the swap.
    """

    def __init__(self, fs: OutputFS, output: str, verb: str, beside: bool = False) -> None:
        self.fs = fs
        self.output = output
        head, _, name = output.rstrip("/").rpartition("/")
        parent = head or ("/" if output.startswith("/") else ".")
        self.where = parent if beside else output
        self.path = fs.join(self.where, f".{name}{LOCK_FILE}" if beside else LOCK_FILE)
        self.holder = Holder.me(verb)
        self._file: IO[bytes] | None = None
        self.held = False
        self._made = False  # whether acquiring made `where` (removed again if left empty)

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lock, or raise OutputInUse naming the run that has it."""
        if is_local(self.output):
            # The output itself must be able to be a directory, even where the lock is beside.
            path = self._local(self.output)
            if os.path.lexists(path) and not os.path.isdir(path):
                raise BadInputError(f"{self.output}: exists and is not a directory")
        self._made = is_local(self.where) and not os.path.exists(self._local(self.where))
        self.fs.mkdirs(self.where)
        if is_local(self.output):
            self._acquire_local(self.path.removeprefix("file://"))
        else:
            self._acquire_object()
        self.held = True

    def _acquire_local(self, path: str) -> None:
        # Open, lock, then check the file is still the one at `path`: a releasing run
        # unlinks it while holding the lock, and a lock on an unlinked file locks nothing.
        while True:
            try:
                f = open(path, "a+b")  # noqa: SIM115 (held open for the run's life)
            except OSError as err:
                raise BadInputError(f"{path}: cannot create the lock file: {err.strerror}") from err
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                f.seek(0)
                other = Holder.parse(f.read())
                f.close()
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise BadInputError(f"{path}: cannot lock: {err.strerror}") from err
                raise self._in_use(other) from None
            try:
                same = os.fstat(f.fileno()).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            f.close()
        f.seek(0)
        left = Holder.parse(f.read())
        if left is not None:
            _say_taken_over(self.output, left)
        f.seek(0)
        f.truncate()
        f.write(self.holder.to_bytes())
        f.flush()
        self._file = f

    def _acquire_object(self) -> None:
        if self.fs.exists(self.path):
            # Only a lock proven stale is taken over: one that cannot be read, or does not
            # parse, may be a live run's, and writing over it would let two runs write here.
            other = self._read_existing()
            if not other.is_dead_here():
                raise self._in_use(other, remote=True)
            _say_taken_over(self.output, other)
        self.fs.write_atomic(self.path, self.holder.to_bytes())
        self.check()

    def _read_existing(self) -> Holder:
        """The holder an existing lock object names; OutputInUse naming the object when it
        cannot be read or does not parse."""
        try:
            data = within(lock_seconds(), self._read_bytes)
        except (OSError, ClozeError) as err:
            raise OutputInUse(
                f"{self.output}: the lock object {self.path} cannot be read ({err}), so "
                "whether a run holds it is unknown; run again, or delete it if no run writes "
                "there"
            ) from None
        holder = Holder.parse(data)
        if holder is None and not data:
            # Beam's S3 reader answers a GET that keeps failing with no bytes.
            raise OutputInUse(
                f"{self.output}: the lock object {self.path} cannot be read (it reads as "
                "empty), so whether a run holds it is unknown; run again, or delete it if "
                "no run writes there"
            )
        if holder is None:
            raise OutputInUse(
                f"{self.output}: the lock object {self.path} is not a lock this tool wrote "
                "(it does not parse); delete it if no run writes there"
            )
        return holder

    def check(self) -> None:
        """OutputInUse unless the lock is still this run's (an object store's lock can be
        overwritten by a run that raced past the first check). Called before a commit."""
        if not self.held or is_local(self.output):
            return
        try:
            now = Holder.parse(within(lock_seconds(), self._read_bytes))
        except FileNotFoundError:
            now = None
        except (OSError, ClozeError) as err:
            self.held = False
            raise OutputInUse(
                f"{self.output}: the lock object {self.path} cannot be read ({err}) to "
                "confirm this run still holds it, so nothing is committed; run again"
            ) from None
        if now is None or now.token != self.holder.token:
            self.held = False
            raise self._in_use(now, remote=True)

    def release(self) -> None:
        if self._file is not None:
            # Only our own file: a directory swapped in took ours away, and the file now at
            # the path may be a later run's.
            with contextlib.suppress(FileNotFoundError):
                if os.stat(self._file.name).st_ino == os.fstat(self._file.fileno()).st_ino:
                    os.unlink(self._file.name)
            self._file.close()  # unlocks
            self._file = None
            if self._made:  # a run that failed before writing leaves no directory behind
                with contextlib.suppress(OSError):
                    os.rmdir(self._local(self.where))
        elif self.held:
            try:
                self.check()
                within(lock_seconds(), lambda: self.fs.delete([self.path]))
            except OutputInUse:
                pass  # no longer ours: another run's lock stays
            except (OSError, ClozeError) as err:
                print(
                    f"{self.output}: the lock object {self.path} could not be removed ({err}); "
                    "delete it before the next run",
                    file=sys.stderr,
                )
        self.held = False

    def _read_bytes(self) -> bytes:
        with self.fs.open(self.path) as f:
            return f.read(4096)

    @staticmethod
    def _local(path: str) -> str:
        return path.removeprefix("file://")

    def _in_use(self, other: Holder | None, remote: bool = False) -> OutputInUse:
        who = other.said() if other else "another run"
        hint = (
            f"; if that run is gone, delete {self.path} and run again"
            if remote
            else "; wait for it to finish or stop it"
        )
        return OutputInUse(f"{self.output}: in use by {who}{hint}")


def _say_taken_over(output: str, left: Holder) -> None:
    print(
        f"{output}: taking over the lock of {left.said()}, which is no longer running",
        file=sys.stderr,
    )


def read_holder(fs: OutputFS, output: str) -> Holder | None:
    """The run holding `output`'s lock now, if one does (for `inspect`): on local disk a
    lock file whose lock nobody holds names a run that has died."""
    path = OutputLock(fs, output, "").path
    if not is_local(output):
        if not fs.exists(path):
            return None
        with fs.open(path) as f:
            return Holder.parse(f.read(4096))
    path = path.removeprefix("file://")
    try:
        f = open(path, "rb")  # noqa: SIM115
    except OSError:
        return None
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return Holder.parse(f.read(4096))
        return None
