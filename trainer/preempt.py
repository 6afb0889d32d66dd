"""Stopping cleanly on SIGTERM (what schedulers and spot instances send) and SIGINT.

A signal only asks: the loop finishes the step it is in, every rank learns of it in the
step's own all-reduce (no extra collective), a committed checkpoint is written, and the
run exits 128 + the signal's number (`schemas.errors.signal_exit_code`: it did not finish),
so that `--resume` continues exactly. A second signal acts as it would have
without us (SIGINT raises KeyboardInterrupt, SIGTERM terminates); a checkpoint being
written then is left uncommitted, and resume ignores it.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """Within `with`: `requested` names the first stop signal received, else None."""

    def __init__(self) -> None:
        self.requested: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():  # signals need it
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested is None:
            self.requested = signal.Signals(signum).name
            return
        # The second: as if we were not here.
        signal.signal(signum, self._previous.get(signum, signal.SIG_DFL))
        signal.raise_signal(signum)
